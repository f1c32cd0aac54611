// Command pgcipher-keys is the key tool of pgcipher's encrypted columns:
// it draws column master keys, draws and wraps column encryption keys
// (printing the SQL that registers them), encrypts and decrypts values
// line by line, and writes the shared test-vector file.
//
//	pgcipher-keys new-cmk
//	pgcipher-keys new-cek (--cmk-file F | --cmk-command C) --cmk-name N --key-name K
//	pgcipher-keys encrypt|decrypt (--cmk-file F | --cmk-command C) --cmk-name N --key-name K
//	    --wrapped-cek HEX --key-id ID --type T --level L --label LABEL [--group G]
//	    [--pattern]  (encrypt, level MATCH: each line is a LIKE-pattern query)
//	pgcipher-keys vectors [-tenants] [-o FILE]
//	pgcipher-keys grant|revoke (--cmk-file F | --cmk-command C) --cmk-name N --key-name K
//	    --wrapped-cek HEX --column LABEL --role R [--access read|write] [--serial S]
//	pgcipher-keys verify-audit (--cmk-file F | --cmk-command C) --cmk-name N
//	    [--head MAC] [--from-start] FILE...
//	pgcipher-keys keyring-init|add-tenant|shred-tenant (--cmk-file F | --cmk-command C)
//	    --cmk-name N --keyring FILE [--tenant T|-] [--dsn CONNINFO]
//
// It is a thin command line over package colcrypt (and packages shred
// and reencrypt, which drive a database): new-cmk prints a CMK as 64 hex digits for the proxy's
// --cmk-file or --cmk-command; new-cek draws a CEK, wraps it with
// colcrypt.WrapCEK and prints the pgcipher.add_column_key call that stores
// it on the server; encrypt and decrypt run colcrypt.Column on standard
// input, for loading or checking data without the proxy.  grant and
// revoke sign a role's right on a column (design 13.12) and print the
// pgcipher.set_column_right call that stores it.  verify-audit checks
// the MAC chain of the proxy's audit log (design 15.15).  keyring-init
// writes a tenant keyring, add-tenant draws tenant keys and prints the
// pgcipher.add_tenant_key calls, shred-tenant destroys one tenant's key
// (design 13.13).  vectors writes columns/test/data/vectors.csv (design
// 13.9; -tenants: tenant_vectors.csv), which the extension's regression
// tests load and compare on the server, and which this command's tests
// regenerate byte for byte.
package main
