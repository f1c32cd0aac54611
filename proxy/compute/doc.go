// Package compute evaluates in the proxy what the server cannot compute on
// ciphertext: aggregates (sum, avg, count, min, max) over the decrypted
// values of encrypted columns, arithmetic and a few functions in select
// lists, HAVING and UPDATE … SET (design 15.8).
//
// Values follow PostgreSQL's types and rules: sum(int4) is int8, sum(int8)
// and avg of integers are numeric with numeric_div's display scale,
// integer arithmetic fails with "integer out of range" rather than
// wrapping, NULLs are ignored by aggregates and empty input gives NULL
// (count gives 0).  What the package cannot compute exactly it does not
// offer: the rewriter refuses those statements.
package compute
