# attnacc: build fragment of the metrics module.
attnaccinclude_HEADERS += lib/metrics.h
