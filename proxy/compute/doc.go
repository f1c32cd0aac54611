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
//
// Package rewrite builds the expressions when it analyses a statement
// (NewAgg, NewBinary, NewCmp, NewCast, NewFunc, NewNeg over Input, Const
// and Param leaves), which types them and refuses what cannot be computed;
// package wire evaluates them with Expr.Eval against an Env holding each
// row's decrypted fields (Value, from colcrypt payloads with FromPayload
// or from the server's text with FromText) and sends the client the
// results.  Decimal is PostgreSQL's numeric, and ParseArray reads the
// array_agg text the server returns for a group.
package compute
