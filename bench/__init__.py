"""pgcipher's benchmark suite: what encryption costs, measured the way the
vendors measured it, stock PostgreSQL and pgcipher side by side in one
interleaved run.  See bench/README.md."""
