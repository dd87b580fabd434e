# attnacc: build fragment of the rng module.
attnaccinclude_HEADERS += lib/rng.h
