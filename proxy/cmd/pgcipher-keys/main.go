package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgcipher/pgcipher/proxy/audit"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/reencrypt"
)

const usage = `usage:
  pgcipher-keys new-cmk
  pgcipher-keys new-cek (--cmk-file F | --cmk-command C) --cmk-name N --key-name K
  pgcipher-keys encrypt|decrypt (--cmk-file F | --cmk-command C) --cmk-name N --key-name K
      --wrapped-cek HEX --key-id ID --type T --level L --label LABEL [--group G]
      [--ore-format 1|1+2|12|2+1|2]  (ORD: the column's order format, default 2)
      [--pattern]  (encrypt, level MATCH: each line is a LIKE-pattern query)
      [--operand]  (encrypt: each line is a comparison operand, at order format 2 a query)
  pgcipher-keys vectors [-tenants] [-o FILE]
  pgcipher-keys grant  (--cmk-file F | --cmk-command C) --cmk-name N --key-name K
      --wrapped-cek HEX --column LABEL --role R --access read|write [--serial S]
  pgcipher-keys revoke (--cmk-file F | --cmk-command C) --cmk-name N --key-name K
      --wrapped-cek HEX --column LABEL --role R [--serial S]
      (print the signed pgcipher.set_column_right call; design 13.12)
  pgcipher-keys verify-audit (--cmk-file F | --cmk-command C) --cmk-name N
      [--head MAC] [--from-start] FILE...   (oldest first: F.1 F.2 ... F)
  pgcipher-keys reencrypt-column --dsn CONNINFO --table T --column C [--batch N]
      (CONNINFO names pgcipher-proxy: the proxy does the crypto, this drives it)
  pgcipher-keys keyring-init (--cmk-file F | --cmk-command C) --cmk-name N --keyring FILE
  pgcipher-keys add-tenant   (--cmk-file F | --cmk-command C) --cmk-name N --keyring FILE
      --tenant T|-   (print the pgcipher.add_tenant_key call; -: a tenant per line on stdin)
  pgcipher-keys shred-tenant (--cmk-file F | --cmk-command C) --cmk-name N --keyring FILE
      --tenant T --dsn CONNINFO   (destroy the tenant's key; then SIGHUP every proxy)
`

// errUsage makes main exit with status 2 after the usage text.
var errUsage = errors.New("usage")

func main() {
	err := run(os.Args[1:], os.Stdin, os.Stdout)
	if errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgcipher-keys: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "new-cmk":
		return newCMK(args, stdout)
	case "new-cek":
		return newCEK(args, stdout)
	case "encrypt", "decrypt":
		return crypt(cmd, args, stdin, stdout)
	case "vectors":
		return vectorsCmd(args, stdout)
	case "reencrypt-column":
		return reencryptCmd(args, stdout)
	case "grant", "revoke":
		return grantCmd(cmd, args, stdout)
	case "verify-audit":
		return verifyAuditCmd(args, stdout)
	case "keyring-init":
		return keyringInitCmd(args, stdout)
	case "add-tenant":
		return addTenantCmd(args, stdin, stdout)
	case "shred-tenant":
		return shredTenantCmd(args, stdout)
	}
	return errUsage
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	return fs
}

func newCMK(args []string, stdout io.Writer) error {
	fs := newFlagSet("new-cmk")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	k := make([]byte, colcrypt.CMKSize)
	if _, err := rand.Read(k); err != nil {
		return err
	}
	_, err := fmt.Fprintln(stdout, hex.EncodeToString(k))
	return err
}

// keyFlags are the flags that name a CMK and a CEK.
type keyFlags struct {
	cmkFile, cmkCommand, cmkName, keyName string
}

func (k *keyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&k.cmkFile, "cmk-file", "", "file holding the CMK as 64 hex digits")
	fs.StringVar(&k.cmkCommand, "cmk-command", "", "command printing the CMK as 64 hex digits")
	fs.StringVar(&k.cmkName, "cmk-name", "", "name of the CMK")
	fs.StringVar(&k.keyName, "key-name", "", "name of the CEK")
}

// loadCMK loads the CMK from exactly one of the file and the command.
func (k *keyFlags) loadCMK() ([]byte, error) {
	switch {
	case (k.cmkFile == "") == (k.cmkCommand == ""):
		return nil, errors.New("give exactly one of --cmk-file and --cmk-command")
	case k.cmkName == "" || k.keyName == "":
		return nil, errors.New("--cmk-name and --key-name are required")
	case k.cmkFile != "":
		return colcrypt.LoadCMKFile(k.cmkFile)
	}
	return colcrypt.LoadCMKCommand(context.Background(), k.cmkCommand)
}

// sqlLiteral quotes s as an SQL string literal (standard conforming).
func sqlLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

func newCEK(args []string, stdout io.Writer) error {
	fs := newFlagSet("new-cek")
	var kf keyFlags
	kf.register(fs)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	cmk, err := kf.loadCMK()
	if err != nil {
		return err
	}
	cek, err := colcrypt.NewCEK(rand.Reader)
	if err != nil {
		return err
	}
	w, err := colcrypt.WrapCEK(cmk, cek, kf.cmkName, kf.keyName, rand.Reader)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "SELECT pgcipher.add_column_key(%s, %s, %s);\n",
		sqlLiteral(kf.keyName), sqlLiteral(kf.cmkName), sqlLiteral(`\x`+hex.EncodeToString(w)))
	return err
}

func crypt(cmd string, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := newFlagSet(cmd)
	var kf keyFlags
	kf.register(fs)
	wrapped := fs.String("wrapped-cek", "", `wrapped CEK in hex (optionally \x...)`)
	keyID := fs.Uint("key-id", 0, "the CEK's key_id")
	typ := fs.String("type", "", "plain type: int4, int8, float8, numeric, text, bytea, date, timestamptz, bool")
	level := fs.String("level", "", "RND, EQ, ORD or MATCH (text only)")
	label := fs.String("label", "", "column label, schema.table.column")
	group := fs.String("group", "", "join group (default: the label)")
	oreFormat := fs.String("ore-format", "2", "ORD: the column's order format (pgcipher.encrypted_columns.ore_format)")
	pattern, operand := false, false
	if cmd == "encrypt" {
		fs.BoolVar(&pattern, "pattern", false, "encrypt each line as a LIKE-pattern query (level MATCH)")
		fs.BoolVar(&operand, "operand", false, "encrypt each line as a comparison operand (at order format 2 a query)")
	}
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	t, err := colcrypt.ParseType(*typ)
	if err != nil {
		return err
	}
	l, err := colcrypt.ParseLevel(*level)
	if err != nil {
		return err
	}
	if pattern && l != colcrypt.MATCH {
		return errors.New("--pattern needs --level MATCH")
	}
	if *label == "" || *keyID == 0 || *keyID > 1<<32-1 {
		return errors.New("--label and --key-id (1 to 4294967295) are required")
	}
	w, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(*wrapped), `\x`))
	if err != nil {
		return fmt.Errorf("--wrapped-cek: %w", err)
	}
	cmk, err := kf.loadCMK()
	if err != nil {
		return err
	}
	cek, err := colcrypt.UnwrapCEK(cmk, w, kf.cmkName, kf.keyName)
	if err != nil {
		return err
	}
	col, err := colcrypt.NewColumn(cek, colcrypt.Spec{
		KeyID: uint32(*keyID), Type: t, Level: l, Label: *label, Group: *group, OREFormat: *oreFormat,
	})
	if err != nil {
		return err
	}
	in := bufio.NewReader(stdin)
	out := bufio.NewWriter(stdout)
	for lineNo := 1; ; lineNo++ {
		line, err := in.ReadString('\n')
		if err == io.EOF && line == "" {
			break
		} else if err != nil && err != io.EOF {
			return err
		}
		line = strings.TrimSuffix(line, "\n")
		var res string
		switch {
		case pattern:
			var ct []byte
			if ct, err = col.EncryptPattern(line, rand.Reader); err == nil {
				res = base64.StdEncoding.EncodeToString(ct)
			}
		case operand:
			var p, ct []byte
			if p, err = colcrypt.Encode(t, line); err == nil {
				if ct, err = col.EncryptOperand(p, rand.Reader); err == nil {
					res = base64.StdEncoding.EncodeToString(ct)
				}
			}
		case cmd == "encrypt":
			res, err = col.EncryptText(line, rand.Reader)
		default:
			res, err = col.DecryptText(strings.TrimSpace(line))
		}
		if err != nil {
			return fmt.Errorf("line %d: %w", lineNo, err)
		}
		out.WriteString(res)
		out.WriteByte('\n')
	}
	return out.Flush()
}

func vectorsCmd(args []string, stdout io.Writer) error {
	fs := newFlagSet("vectors")
	file := fs.String("o", "", "output file (default: standard output)")
	tenants := fs.Bool("tenants", false, "the tenant vectors (columns/test/data/tenant_vectors.csv) instead")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	gen := vectors
	if *tenants {
		gen = tenantVectors
	}
	b, err := gen()
	if err != nil {
		return err
	}
	if *file == "" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(*file, b, 0o644)
}

// reencryptCmd moves an ORD column to order format 2 online through the
// proxy (package reencrypt; design 13.5b).
func reencryptCmd(args []string, stdout io.Writer) error {
	fs := newFlagSet("reencrypt-column")
	dsn := fs.String("dsn", "", "connection string of pgcipher-proxy (libpq form or URL)")
	table := fs.String("table", "", "the table, as SQL names it")
	column := fs.String("column", "", "the ORD column")
	batch := fs.Int("batch", 500, "rows per transaction")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *dsn == "" || *table == "" || *column == "" {
		return errUsage
	}
	ctx := context.Background()
	conn, err := connect(ctx, *dsn, "reencrypt-column")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	res, err := reencrypt.Column(ctx, conn, *table, *column, reencrypt.Options{Batch: *batch,
		Log: func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "column %s of %s: order format 2 (was %s), %d rows rewritten\n", *column, *table, res.From, res.Moved)
	return nil
}

// connect opens the command's connection to dsn, its application_name
// "pgcipher-keys CMD" unless dsn names one.
func connect(ctx context.Context, dsn, cmd string) (*pgconn.PgConn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "pgcipher-keys " + cmd
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return conn, nil
}

// grantCmd signs a right of a role on a column (revoke: access none) and
// prints the call that stores it.  The serial is the time in
// microseconds unless given: a later grant of the same right replaces an
// earlier one.
func grantCmd(cmd string, args []string, stdout io.Writer) error {
	fs := newFlagSet(cmd)
	var kf keyFlags
	kf.register(fs)
	label := fs.String("column", "", "the column's label, schema.table.column as pgcipher.columns shows it")
	role := fs.String("role", "", "the database role (the login role the proxy sees)")
	access := fs.String("access", "read", "read (decrypt, compare, compute, write) or write (encrypt only)")
	serial := fs.Int64("serial", 0, "the grant's serial (default: the time in microseconds)")
	wrapped := fs.String("wrapped-cek", "", `the column key as pgcipher.column_keys holds it, in hex (optionally \x...)`)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	w, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(*wrapped), `\x`))
	if err != nil || len(w) != colcrypt.WrappedCEKSize {
		return fmt.Errorf("--wrapped-cek: give the key's wrapped_cek from pgcipher.column_keys (%d bytes in hex)", colcrypt.WrappedCEKSize)
	}
	if cmd == "revoke" {
		*access = "none"
	}
	acc, err := colcrypt.ParseAccess(*access)
	if err != nil || (cmd == "grant" && acc == colcrypt.AccessNone) {
		return fmt.Errorf("--access %q: give read or write (revoke takes a right away)", *access)
	}
	if *label == "" || *role == "" {
		return errors.New("--column and --role are required")
	}
	cmk, err := kf.loadCMK()
	if err != nil {
		return err
	}
	key, err := colcrypt.RightsKey(cmk, kf.cmkName)
	if err != nil {
		return err
	}
	if *serial == 0 {
		*serial = time.Now().UnixMicro()
	}
	if _, err := colcrypt.UnwrapCEK(cmk, w, kf.cmkName, kf.keyName); err != nil {
		return fmt.Errorf("--wrapped-cek: not key %q under this CMK: %w", kf.keyName, err)
	}
	g := colcrypt.Grant{Label: *label, KeyName: kf.keyName, Role: *role, Access: acc, Serial: *serial, WrappedCEK: w}
	_, err = fmt.Fprintf(stdout, "SELECT pgcipher.set_column_right(%s, %s, %s, %s, %d, %s);\n",
		sqlLiteral(g.Label), sqlLiteral(g.Role), sqlLiteral(g.KeyName), sqlLiteral(acc.String()), g.Serial,
		sqlLiteral(`\x`+hex.EncodeToString(g.MAC(key))))
	return err
}

// verifyAuditCmd checks the MAC chain of the proxy's audit log (design
// 15.15) across its files, oldest first; --head is the MAC the proxy
// logged as the chain's head, which shows records removed from the end.
func verifyAuditCmd(args []string, stdout io.Writer) error {
	fs := newFlagSet("verify-audit")
	var kf keyFlags
	kf.register(fs)
	head := fs.String("head", "", "the chain's head as the proxy logged it (the last record's mac)")
	fromStart := fs.Bool("from-start", false, "the first file must begin the chain (no older file removed)")
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		return errUsage
	}
	kf.keyName = "-" // no column key is named
	cmk, err := kf.loadCMK()
	if err != nil {
		return err
	}
	key, err := audit.Key(cmk, kf.cmkName)
	if err != nil {
		return err
	}
	h, err := audit.Verify(fs.Args(), key, *head, *fromStart)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "audit: chain verified, %d record(s); the last: %s\n", h.Records, h)
	return err
}
