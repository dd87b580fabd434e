# attnacc: build fragment of the attn module.
attnaccinclude_HEADERS += lib/attn.h
