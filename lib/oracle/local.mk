# attnacc: build fragment of the oracle module.
attnaccinclude_HEADERS += lib/oracle.h
