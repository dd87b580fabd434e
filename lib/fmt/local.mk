# attnacc: build fragment of the fmt module.
attnaccinclude_HEADERS += lib/fmt.h
