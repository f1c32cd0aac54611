package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pgcipher/pgcipher/proxy/kms"
)

const usage = `usage:
  pgcipher-kms openbao-kv          COMMON --path P [--mount secret] [--field kek] [--version N]
  pgcipher-kms openbao-transit-new COMMON --key NAME --file F [--mount transit]
  pgcipher-kms openbao-transit     COMMON --key NAME --file F [--mount transit]
  pgcipher-kms kmip-new            KMIP --file F
  pgcipher-kms kmip                KMIP --file F

  the unwrap mode (initdb --encryption-key-mode=unwrap), the action appended by the server:
  pgcipher-kms openbao-transit-keyring COMMON --key NAME [--mount transit] wrap|unwrap
  pgcipher-kms kmip-keyring        KMIP --key-id ID wrap|unwrap
  pgcipher-kms kmip-create-key     KMIP

  openbao-kv           print the key held as 64 hex digits in a field of a KV v2 secret
  openbao-transit-new  ask Transit for a new 256-bit key, wrapped under key NAME, and
                       write the ciphertext to F (never over an existing F)
  openbao-transit      have Transit decrypt F with key NAME and print the key
  kmip-new             have the KMIP server create an AES-256 key, encrypt a new random
                       256-bit key with it (AES-256-GCM) and write the result to F
                       (never over an existing F)
  kmip                 have the KMIP server decrypt F and print the key
  openbao-transit-keyring
                       wrap: have Transit encrypt the data keys read from stdin (hex, one
                       line) with key NAME and print the ciphertext; unwrap: have Transit
                       decrypt the ciphertext read from stdin and print the data keys
  kmip-keyring         the same with the KMIP server's key ID (AES-256-GCM)
  kmip-create-key      have the KMIP server create and activate an AES-256 key; print its ID

COMMON:
  --addr URL           OpenBao's address (default https://127.0.0.1:8200)
  --token-file F       file holding the token (mode 600, the running user's own)
  --ca-cert F          CA certificate(s) that sign OpenBao's (default: the system's)
  --client-cert F      client certificate, for a listener that asks for one,
  --client-key F       and its key (mode 600, the running user's own)
  --namespace NS       OpenBao namespace
  --timeout D          limit for the whole command (default 10s)

KMIP:
  --addr HOST:PORT     the KMIP server (default 127.0.0.1:5696)
  --ca-cert F          CA certificate(s) that sign the server's (default: the system's)
  --client-cert F      the client certificate the server knows this client by,
  --client-key F       and its key (mode 600, the running user's own)
  --timeout D          limit for the whole command (default 10s)

Keys are printed as one line of 64 hex digits, for encryption_key_command
and pgcipher-proxy --cmk-command.  Failures: one line on stderr, exit 1.
`

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg + " (pgcipher-kms --help)" }

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// subcommand runs one command with its flags parsed.
type subcommand struct {
	run func(ctx context.Context, c *common, args []string, stdin io.Reader, stdout io.Writer) error
}

var commands = map[string]subcommand{
	"openbao-kv":          {openbaoKV},
	"openbao-transit-new": {openbaoTransitNew},
	"openbao-transit":     {openbaoTransit},
	"kmip-new":            {kmipNew},
	"kmip":                {kmipUnwrap},

	"openbao-transit-keyring": {openbaoTransitKeyring},
	"kmip-keyring":            {kmipKeyring},
	"kmip-create-key":         {kmipCreateKey},
}

// run is main with its exit status returned.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	sub, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "pgcipher-kms: unknown command %q (openbao-kv, openbao-transit-new, openbao-transit, kmip-new, kmip, openbao-transit-keyring, kmip-keyring, kmip-create-key; pgcipher-kms --help)\n", name)
		return 2
	}
	var c common
	err := sub.run(ctx, &c, args[1:], stdin, stdout)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "pgcipher-kms: %s: %s\n", name, oneLine(err.Error()))
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// common are the flags every command takes.
type common struct {
	opts   kms.Options
	fs     *flag.FlagSet
	action bool // the command takes the action (wrap, unwrap) after its flags
}

// flags makes the command's flag set with the common flags in it.
func (c *common) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line by run
	fs.StringVar(&c.opts.Addr, "addr", "https://127.0.0.1:8200", "")
	fs.StringVar(&c.opts.TokenFile, "token-file", "", "")
	fs.StringVar(&c.opts.CACert, "ca-cert", "", "")
	fs.StringVar(&c.opts.ClientCert, "client-cert", "", "")
	fs.StringVar(&c.opts.ClientKey, "client-key", "", "")
	fs.StringVar(&c.opts.Namespace, "namespace", "", "")
	fs.DurationVar(&c.opts.Timeout, "timeout", kms.DefaultTimeout, "")
	c.fs = fs
	return fs
}

// parse parses args and checks what every command needs; required names
// the command's own flags that must not be empty.
func (c *common) parse(args []string, required map[string]*string) error {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if c.fs.NArg() > 0 && !c.action {
		return usageError{fmt.Sprintf("unexpected argument %q", c.fs.Arg(0))}
	}
	if c.opts.TokenFile == "" {
		return usageError{"--token-file is required (the token is never taken from the command line)"}
	}
	if c.opts.Timeout <= 0 {
		return usageError{"--timeout must be positive"}
	}
	for _, name := range []string{"path", "field", "key", "file", "mount"} {
		if v, ok := required[name]; ok && *v == "" {
			return usageError{"--" + name + " is required"}
		}
	}
	return nil
}

// client makes the OpenBao client of the parsed flags.
func (c *common) client() (*kms.OpenBao, error) {
	return kms.NewOpenBao(c.opts)
}

func openbaoKV(ctx context.Context, c *common, args []string, _ io.Reader, stdout io.Writer) error {
	var s kms.KVSecret
	fs := c.flags("openbao-kv")
	fs.StringVar(&s.Mount, "mount", "secret", "")
	fs.StringVar(&s.Path, "path", "", "")
	fs.StringVar(&s.Field, "field", "kek", "")
	fs.IntVar(&s.Version, "version", 0, "")
	if err := c.parse(args, map[string]*string{"mount": &s.Mount, "path": &s.Path, "field": &s.Field}); err != nil {
		return err
	}
	if s.Version < 0 {
		return usageError{"--version must be positive (or 0, the current version)"}
	}
	b, err := c.client()
	if err != nil {
		return err
	}
	key, err := b.ReadKVKey(ctx, s)
	if err != nil {
		return err
	}
	defer clear(key)
	return kms.WriteKey(stdout, key)
}

// transitFlags are the flags of both Transit commands.
func transitFlags(c *common, name string) (*kms.TransitKey, *string) {
	var k kms.TransitKey
	var file string
	fs := c.flags(name)
	fs.StringVar(&k.Mount, "mount", "transit", "")
	fs.StringVar(&k.Name, "key", "", "")
	fs.StringVar(&file, "file", "", "")
	return &k, &file
}

func openbaoTransitNew(ctx context.Context, c *common, args []string, _ io.Reader, stdout io.Writer) error {
	k, file := transitFlags(c, "openbao-transit-new")
	if err := c.parse(args, map[string]*string{"mount": &k.Mount, "key": &k.Name, "file": file}); err != nil {
		return err
	}
	// refuse an existing file before asking Transit for anything
	if _, err := os.Lstat(*file); err == nil {
		return fmt.Errorf("%s exists: a key file is never overwritten (move it away first, if it is no longer needed)", *file)
	}
	b, err := c.client()
	if err != nil {
		return err
	}
	ct, err := b.NewWrappedKey(ctx, *k)
	if err != nil {
		return err
	}
	if err := kms.WriteNewFile(*file, []byte(ct+"\n")); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "wrote %s: a new 256-bit key wrapped by %s (%s)\n", *file, k, ct[:strings.LastIndexByte(ct, ':')])
	return err
}

func openbaoTransit(ctx context.Context, c *common, args []string, _ io.Reader, stdout io.Writer) error {
	k, file := transitFlags(c, "openbao-transit")
	if err := c.parse(args, map[string]*string{"mount": &k.Mount, "key": &k.Name, "file": file}); err != nil {
		return err
	}
	ct, err := readWrapped(*file)
	if err != nil {
		return err
	}
	b, err := c.client()
	if err != nil {
		return err
	}
	key, err := b.Unwrap(ctx, *k, ct)
	if errors.Is(err, kms.ErrBadKey) {
		return fmt.Errorf("wrapped key file %s: %w", *file, err)
	}
	if err != nil {
		return err
	}
	defer clear(key)
	return kms.WriteKey(stdout, key)
}

// readWrapped reads the ciphertext file of openbao-transit-new.
func readWrapped(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("wrapped key file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10+1))
	if err != nil {
		return "", fmt.Errorf("wrapped key file: %w", err)
	}
	if len(b) > 64<<10 {
		return "", fmt.Errorf("wrapped key file %s is larger than 64 kB: not one this command wrote", path)
	}
	return string(b), nil
}

// oneLine makes a message one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// kmipFlags parses the flags of both KMIP commands that take --file.
func kmipFlags(name string, args []string) (kms.KMIPOptions, string, error) {
	var file string
	o, fs, err := kmipParse(name, args, func(fs *flag.FlagSet) { fs.StringVar(&file, "file", "", "") })
	switch {
	case err != nil:
		return o, "", err
	case fs.NArg() > 0:
		return o, "", usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	case file == "":
		return o, "", usageError{"--file is required"}
	}
	return o, file, nil
}

// kmipParse parses the flags every KMIP command takes and those that
// more adds; the arguments after them are left in the flag set.
func kmipParse(name string, args []string, more func(*flag.FlagSet)) (kms.KMIPOptions, *flag.FlagSet, error) {
	var o kms.KMIPOptions
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:5696", "")
	fs.StringVar(&o.CACert, "ca-cert", "", "")
	fs.StringVar(&o.ClientCert, "client-cert", "", "")
	fs.StringVar(&o.ClientKey, "client-key", "", "")
	fs.DurationVar(&o.Timeout, "timeout", kms.DefaultTimeout, "")
	more(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, fs, err
		}
		return o, fs, usageError{err.Error()}
	}
	if o.Timeout <= 0 {
		return o, fs, usageError{"--timeout must be positive"}
	}
	return o, fs, nil
}

func kmipNew(ctx context.Context, _ *common, args []string, _ io.Reader, stdout io.Writer) error {
	o, file, err := kmipFlags("kmip-new", args)
	if err != nil {
		return err
	}
	// refuse an existing file before the server creates anything
	if _, err := os.Lstat(file); err == nil {
		return fmt.Errorf("%s exists: a key file is never overwritten (move it away first, if it is no longer needed)", file)
	}
	k, err := kms.NewKMIP(o)
	if err != nil {
		return err
	}
	w, err := k.NewWrappedKey(ctx)
	if err != nil {
		return err
	}
	text, err := w.MarshalText()
	if err != nil {
		return err
	}
	if err := kms.WriteNewFile(file, text); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "wrote %s: a new 256-bit key wrapped by KMIP key %s at %s (AES-256-GCM)\n", file, w.ID, o.Addr)
	return err
}

func kmipUnwrap(ctx context.Context, _ *common, args []string, _ io.Reader, stdout io.Writer) error {
	o, file, err := kmipFlags("kmip", args)
	if err != nil {
		return err
	}
	text, err := readWrapped(file)
	if err != nil {
		return err
	}
	var w kms.KMIPWrappedKey
	if err := w.UnmarshalText([]byte(text)); err != nil {
		return fmt.Errorf("wrapped key file %s: %w (made by pgcipher-kms kmip-new?)", file, err)
	}
	k, err := kms.NewKMIP(o)
	if err != nil {
		return err
	}
	key, err := k.Unwrap(ctx, w)
	if errors.Is(err, kms.ErrBadKey) {
		return fmt.Errorf("wrapped key file %s: %w", file, err)
	}
	if err != nil {
		return err
	}
	defer clear(key)
	return kms.WriteKey(stdout, key)
}

// action is the one argument after the flags of an unwrap-mode command:
// "wrap" or "unwrap", which the server appends.
func action(fs *flag.FlagSet) (string, error) {
	if fs.NArg() != 1 || (fs.Arg(0) != "wrap" && fs.Arg(0) != "unwrap") {
		return "", usageError{"give the action, wrap or unwrap, after the flags (the server appends it)"}
	}
	return fs.Arg(0), nil
}

// keyring runs the unwrap mode's protocol (docs/design.md, section 9.4)
// with s: wrap reads the data keys (hex, one line) from stdin and prints
// their wrapped form; unwrap reads the wrapped form and prints the keys.
func keyring(ctx context.Context, s kms.Sealer, act string, stdin io.Reader, stdout io.Writer) error {
	line, err := readLine(stdin)
	if err != nil {
		return err
	}
	defer clear(line)
	if act == "wrap" {
		keys := make([]byte, hex.DecodedLen(len(line)))
		defer clear(keys)
		if _, err := hex.Decode(keys, line); err != nil || len(keys) == 0 {
			return fmt.Errorf("wrap: standard input is not one line of hexadecimal data keys (%d characters)", len(line))
		}
		wrapped, err := s.Seal(ctx, keys)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, wrapped)
		return err
	}
	keys, err := s.Unseal(ctx, string(line))
	if err != nil {
		return err
	}
	defer clear(keys)
	return kms.WriteKey(stdout, keys)
}

// readLine reads the one line the server writes to a key command's stdin.
func readLine(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, 2*kms.MaxSealed+3))
	if err != nil {
		return nil, fmt.Errorf("reading standard input: %w", err)
	}
	if len(b) > 2*kms.MaxSealed+2 {
		clear(b)
		return nil, fmt.Errorf("standard input is longer than %d bytes: not what the server writes", 2*kms.MaxSealed+2)
	}
	line := bytes.TrimRight(b, "\r\n")
	if len(line) == 0 || bytes.ContainsAny(line, "\r\n") {
		clear(b)
		return nil, errors.New("standard input is not one line (the server writes the data keys or their wrapped form)")
	}
	return line, nil
}

func openbaoTransitKeyring(ctx context.Context, c *common, args []string, stdin io.Reader, stdout io.Writer) error {
	k, _ := transitFlags(c, "openbao-transit-keyring")
	c.action = true
	if err := c.parse(args, map[string]*string{"mount": &k.Mount, "key": &k.Name}); err != nil {
		return err
	}
	act, err := action(c.fs)
	if err != nil {
		return err
	}
	b, err := c.client()
	if err != nil {
		return err
	}
	return keyring(ctx, kms.TransitSealer{B: b, K: *k}, act, stdin, stdout)
}

func kmipKeyring(ctx context.Context, _ *common, args []string, stdin io.Reader, stdout io.Writer) error {
	var id string
	o, fs, err := kmipParse("kmip-keyring", args, func(fs *flag.FlagSet) { fs.StringVar(&id, "key-id", "", "") })
	if err != nil {
		return err
	}
	if id == "" {
		return usageError{"--key-id is required (pgcipher-kms kmip-create-key makes a key)"}
	}
	act, err := action(fs)
	if err != nil {
		return err
	}
	k, err := kms.NewKMIP(o)
	if err != nil {
		return err
	}
	return keyring(ctx, kms.KMIPSealer{K: k, ID: id}, act, stdin, stdout)
}

func kmipCreateKey(ctx context.Context, _ *common, args []string, _ io.Reader, stdout io.Writer) error {
	o, fs, err := kmipParse("kmip-create-key", args, func(*flag.FlagSet) {})
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	k, err := kms.NewKMIP(o)
	if err != nil {
		return err
	}
	id, err := k.CreateKey(ctx)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, id)
	return err
}
