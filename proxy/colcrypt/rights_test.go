package colcrypt

import (
	"bytes"
	"testing"
)

func TestGrantMAC(t *testing.T) {
	cmk := bytes.Repeat([]byte{7}, CMKSize)
	key, err := RightsKey(cmk, "main")
	if err != nil {
		t.Fatal(err)
	}
	w1, w2 := bytes.Repeat([]byte{1}, WrappedCEKSize), bytes.Repeat([]byte{2}, WrappedCEKSize)
	g := Grant{Label: "public.t.c", KeyName: "k1", Role: "app", Access: AccessRead, Serial: 42, WrappedCEK: w1}
	mac := g.MAC(key)
	if len(mac) != MACSize || !g.Verify(key, mac) {
		t.Fatalf("a grant does not verify under its own key")
	}
	other, _ := RightsKey(cmk, "other")
	otherCMK, _ := RightsKey(bytes.Repeat([]byte{8}, CMKSize), "main")
	for _, tc := range []struct {
		what string
		g    Grant
		key  []byte
	}{
		{"another label", Grant{"public.t.d", "k1", "app", AccessRead, 42, w1}, key},
		{"another key name", Grant{"public.t.c", "k2", "app", AccessRead, 42, w1}, key},
		{"another role", Grant{"public.t.c", "k1", "dba", AccessRead, 42, w1}, key},
		{"another access", Grant{"public.t.c", "k1", "app", AccessWrite, 42, w1}, key},
		{"another serial", Grant{"public.t.c", "k1", "app", AccessRead, 43, w1}, key},
		// the same names in another database, under another key
		{"another wrapped key", Grant{"public.t.c", "k1", "app", AccessRead, 42, w2}, key},
		// lengths keep the fields apart
		{"a field's end moved", Grant{"public.t.ck", "1", "app", AccessRead, 42, w1}, key},
		{"another CMK name", g, other},
		{"another CMK", g, otherCMK},
	} {
		if tc.g.Verify(tc.key, mac) {
			t.Errorf("%s: the MAC verifies", tc.what)
		}
	}
	if _, err := RightsKey(cmk[:16], "main"); err == nil {
		t.Errorf("a 16-byte CMK was taken")
	}
}

func TestParseAccess(t *testing.T) {
	for _, a := range []Access{AccessNone, AccessWrite, AccessRead} {
		if b, err := ParseAccess(a.String()); err != nil || b != a {
			t.Errorf("%v: %v, %v", a, b, err)
		}
	}
	if _, err := ParseAccess("decrypt"); err == nil {
		t.Errorf("an unknown access parsed")
	}
	if !(AccessRead > AccessWrite && AccessWrite > AccessNone) {
		t.Errorf("the levels do not include each other in order")
	}
}
