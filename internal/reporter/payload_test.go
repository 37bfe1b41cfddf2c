package reporter

import (
	"bytes"
	"testing"
)

func TestPayloadNames(t *testing.T) {
	for payload, want := range map[string]bool{
		`{"project":"auth","version":"1.4.0"}`:                    true,
		`{"project":"auth","version":"1.4.0","run":"https://ci"}`: true,
		`"{\"project\":\"auth\",\"version\":\"1.4.0\"}"`:          true,
		`{"project":"auth-ui","version":"1.4.0"}`:                 false, // another Project of the same repository
		`{"project":"auth","version":"1.4.1"}`:                    false,
		`{"project":"auth"}`:                                      false,
		`{"project":["auth"],"version":"1.4.0"}`:                  false,
		`{}`:                                                      false,
		`"auth 1.4.0"`:                                            false,
		``:                                                        false,
		`null`:                                                    false,
		`{"project":"auth","version":"1.4.0"} {"project":"other"}`: false,
		// A key that differs only in case names nothing.
		`{"project":"notes","version":"1.4.0","Project":"auth"}`: false,
		`{"project":"auth","version":"1.4.0","PROJECT":"notes"}`: true,
	} {
		if got := PayloadNames([]byte(payload), "auth", "1.4.0"); got != want {
			t.Errorf("%s: %v", payload, got)
		}
	}
}

func FuzzPayloadNames(f *testing.F) {
	for _, seed := range []string{`{"project":"auth","version":"1.4.0"}`, `"{\"project\":\"auth\"}"`, `{}`, `[]`, `"x"`, ``} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		if PayloadNames(payload, "auth", "1.4.0") && !bytes.Contains(payload, []byte("auth")) {
			t.Fatalf("%q names auth without saying it", payload)
		}
	})
}
