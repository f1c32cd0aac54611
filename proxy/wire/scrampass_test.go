package wire

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
)

// TestPassThrough: a client conversation run with the placeholder
// password logs in to a SCRAM server holding the user's verifier once
// passThrough rewrites its proof, and accepts the server's signature as
// rewritten; a forged signature or another verifier's salt is refused.
// (The login against PostgreSQL itself: TestPoolAuthQuery.)
func TestPassThrough(t *testing.T) {
	factors := scram.KeyFactors{Salt: "0123456789abcdef", Iters: 4096}
	user, _ := scram.SHA256.NewClient("u", "the password", "")
	creds, err := user.GetStoredCredentialsWithError(factors)
	if err != nil {
		t.Fatal(err)
	}
	// the client's own login to the proxy reveals its key
	srv, _ := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) { return creds, nil })
	conv, cc := srv.NewConversation(), user.NewConversation()
	c1, _ := cc.Step("")
	s1, _ := conv.Step(c1)
	c2, _ := cc.Step(s1)
	if _, err := conv.Step(c2); err != nil || !conv.Valid() {
		t.Fatalf("the client's login: %v", err)
	}
	key, err := clientKeyOf(creds, c1, s1, c2)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		salt  string // the server's verifier's salt, if not the client's
		forge bool
		want  string
	}{
		{name: "passes"},
		{name: "forged server signature", forge: true, want: "signature does not match"},
		{name: "another salt", salt: "fedcba9876543210", want: "not the one the client logged in with"},
	} {
		t.Run(c.name, func(t *testing.T) {
			server := creds
			if c.salt != "" {
				other, _ := scram.SHA256.NewClient("u", "the password", "")
				server, _ = other.GetStoredCredentialsWithError(scram.KeyFactors{Salt: c.salt, Iters: 4096})
			}
			srv, _ := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) { return server, nil })
			conv := srv.NewConversation()
			placeholder, _ := scram.SHA256.NewClient("", passPlaceholder, "")
			pc := placeholder.NewConversation()
			p := &passThrough{keys: scramKeys{clientKey: key, creds: creds}}
			first, _ := pc.Step("")
			initial := append([]byte("SCRAM-SHA-256\x00"), binary.BigEndian.AppendUint32(nil, uint32(len(first)))...)
			if err := p.clientMessage(append(initial, first...)); err != nil {
				t.Fatal(err)
			}
			sFirst, _ := conv.Step(first)
			p.serverFirst = []byte(sFirst)
			final, _ := pc.Step(sFirst)
			body := []byte(final)
			err := p.clientMessage(body)
			if err == nil {
				var sFinal string
				if sFinal, err = conv.Step(string(body)); err != nil {
					t.Fatalf("the server refused the rewritten proof: %v", err)
				}
				if c.forge {
					sFinal = "v=" + strings.Repeat("A", len(sFinal)-3) + "="
				}
				data := []byte(sFinal)
				if err = p.serverFinal(data); err == nil {
					if _, err := pc.Step(string(data)); err != nil || !pc.Valid() {
						t.Fatalf("pgconn's side refused the rewritten signature: %v", err)
					}
				}
			}
			if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("%v, want %q", err, c.want)
			}
		})
	}
}
