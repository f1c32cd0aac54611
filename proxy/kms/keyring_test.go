package kms

import (
	"strings"
	"testing"
)

// TestParseKMIPSealed: the one-line form of KMIPSealer is read strictly.
func TestParseKMIPSealed(t *testing.T) {
	iv := strings.Repeat("ab", gcmIVSize)
	tag := strings.Repeat("cd", gcmTagSize)
	good := "kmip:v1:MTIz:" + iv + ":0011:" + tag
	w, err := parseKMIPSealed(good)
	if err != nil || w.ID != "123" || len(w.IV) != gcmIVSize || len(w.Data) != 2 || len(w.Tag) != gcmTagSize {
		t.Fatalf("good form: %+v, %v", w, err)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"other prefix", "vault:v1:abc", `does not start with "kmip:v1:"`},
		{"three fields", "kmip:v1:MTIz:" + iv + ":0011", "four fields"},
		{"five fields", good + ":00", "four fields"},
		{"identifier not base64url", "kmip:v1:M+Iz:" + iv + ":0011:" + tag, "not base64url"},
		{"empty identifier", "kmip:v1::" + iv + ":0011:" + tag, "not base64url"},
		{"data not hex", "kmip:v1:MTIz:" + iv + ":zz:" + tag, "data is not hex"},
		{"empty data", "kmip:v1:MTIz:" + iv + "::" + tag, "data is not hex"},
		{"short IV", "kmip:v1:MTIz:abab:0011:" + tag, "wrong size"},
		{"short tag", "kmip:v1:MTIz:" + iv + ":0011:cdcd", "wrong size"},
	} {
		if _, err := parseKMIPSealed(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// TestSealInput: nothing empty or larger than MaxSealed is sent to a KMS.
func TestSealInput(t *testing.T) {
	for _, n := range []int{0, MaxSealed + 1} {
		if err := checkSealInput(make([]byte, n)); err == nil {
			t.Errorf("%d bytes accepted", n)
		}
	}
	if err := checkSealInput(make([]byte, 232)); err != nil {
		t.Error(err)
	}
}
