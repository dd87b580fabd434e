# attnacc: build fragment of the benchmark programs (make bench); add a program to EXTRA_PROGRAMS and AA_BENCHES.
AA_BENCHES =
