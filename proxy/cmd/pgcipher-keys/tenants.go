// Tenant keys (design 13.13): the keyring file, a tenant's key, and the
// shredding of one tenant.

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/pgcipher/pgcipher/proxy/catalog"
	"github.com/pgcipher/pgcipher/proxy/colcrypt"
	"github.com/pgcipher/pgcipher/proxy/shred"
)

// tenantFlags: the CMK, the keyring file and the tenant.
type tenantFlags struct {
	keyFlags
	keyring, tenant string
}

func (t *tenantFlags) register(fs interface {
	StringVar(*string, string, string, string)
}, withTenant bool) {
	fs.StringVar(&t.cmkFile, "cmk-file", "", "file holding the CMK as 64 hex digits")
	fs.StringVar(&t.cmkCommand, "cmk-command", "", "command printing the CMK as 64 hex digits")
	fs.StringVar(&t.cmkName, "cmk-name", "", "name of the CMK")
	fs.StringVar(&t.keyring, "keyring", "", "the tenant keyring file (the proxy's --tenant-keyring)")
	if withTenant {
		fs.StringVar(&t.tenant, "tenant", "", "the tenant's name, as pgcipher.tenant gives it (add-tenant: - reads names from standard input)")
	}
}

func (t *tenantFlags) load(withTenant bool) ([]byte, error) {
	if t.keyring == "" || (withTenant && t.tenant == "") {
		return nil, errors.New("--keyring and --tenant are required")
	}
	t.keyName = "-" // no column key is named
	return t.loadCMK()
}

// keyringInitCmd writes a new keyring (epoch 1); an existing file is
// refused: replacing it would lose every tenant's key.
func keyringInitCmd(args []string, stdout io.Writer) error {
	fs := newFlagSet("keyring-init")
	var tf tenantFlags
	tf.register(fs, false)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	tf.tenant = "-"
	cmk, err := tf.load(false)
	if err != nil {
		return err
	}
	if _, err := os.Stat(tf.keyring); err == nil {
		return fmt.Errorf("keyring-init: %s exists; replacing it would lose every tenant key wrapped under it", tf.keyring)
	}
	r, err := colcrypt.NewKeyring(rand.Reader)
	if err != nil {
		return err
	}
	if err := r.Write(tf.keyring, cmk, tf.cmkName, rand.Reader); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "tenant keyring %s: epoch 1 (keep it out of backups and snapshots)\n", tf.keyring)
	return err
}

// addTenantCmd draws a tenant's key and prints the call that stores it
// (through the proxy, SELECT pgcipher.add_tenant_key('t42') does the same);
// --tenant - reads one tenant name per line from standard input and
// prints a call for each (many tenants at once, in one process).
func addTenantCmd(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := newFlagSet("add-tenant")
	var tf tenantFlags
	tf.register(fs, true)
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return errUsage
	}
	cmk, err := tf.load(true)
	if err != nil {
		return err
	}
	r, err := colcrypt.LoadKeyring(tf.keyring, cmk, tf.cmkName)
	if err != nil {
		return err
	}
	names := []string{tf.tenant}
	if tf.tenant == "-" {
		names = nil
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			if n := strings.TrimSpace(sc.Text()); n != "" {
				names = append(names, n)
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
	}
	out := bufio.NewWriter(stdout)
	for _, name := range names {
		id, epoch, wrapped, err := catalog.NewTenantKey(r, name)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "SELECT pgcipher.add_tenant_key(%s, %d, %d, '\\x%s');\n",
			sqlLiteral(name), id, epoch, hex.EncodeToString(wrapped))
	}
	return out.Flush()
}

// shredTenantCmd destroys one tenant's key (package shred).
func shredTenantCmd(args []string, stdout io.Writer) error {
	fs := newFlagSet("shred-tenant")
	var tf tenantFlags
	tf.register(fs, true)
	dsn := fs.String("dsn", "", "connection string of the database (or of pgcipher-proxy in front of it)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *dsn == "" {
		return errUsage
	}
	cmk, err := tf.load(true)
	if err != nil {
		return err
	}
	ctx := context.Background()
	conn, err := connect(ctx, *dsn, "shred-tenant")
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	start := time.Now()
	res, err := shred.Tenant(ctx, conn, shred.Keyring{Path: tf.keyring, CMK: cmk, CMKName: tf.cmkName}, tf.tenant)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "tenant %s shredded: key %d destroyed, %d other tenant keys under keyring epoch %d, in %d ms; SIGHUP every proxy\n",
		tf.tenant, res.KeyID, res.Rewrapped, res.Epoch, time.Since(start).Milliseconds())
	return err
}
