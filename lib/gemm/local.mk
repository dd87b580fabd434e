# attnacc: build fragment of the gemm module.
attnaccinclude_HEADERS += lib/gemm.h
