package bus

import (
	"strings"
	"testing"
	"time"
)

func TestDecodeDocuments(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	cases := []struct {
		what, raw string
		decode    func([]byte) error
		ok        bool
	}{
		{"registration", `{"module":"web","nodes":["n1","n2"],"providers":["db"],"holdsData":false,"step":1}`, regDecode, true},
		{"registration naming itself", `{"module":"web","nodes":["n1"],"providers":["web"],"holdsData":false}`, regDecode, false},
		{"registration without nodes", `{"module":"web","nodes":[],"providers":[],"holdsData":false}`, regDecode, false},
		{"registration with an unknown field", `{"module":"web","nodes":["n1"],"providers":[],"holdsData":false,"x":1}`, regDecode, false},
		{"registration with a node of spaces", `{"module":"web","nodes":["n 1"],"providers":[],"holdsData":false}`, regDecode, false},
		{"build done", `{"module":"web","fingerprint":"f1","state":"done","at":"2026-01-02T03:04:05Z"}`, buildDecode, true},
		{"build of an unknown state", `{"module":"web","fingerprint":"f1","state":"maybe","at":"2026-01-02T03:04:05Z"}`, buildDecode, false},
		{"build without a time", `{"module":"web","fingerprint":"f1","state":"done","at":"yesterday"}`, buildDecode, false},
		{"hold", `{"module":"web","fingerprint":"f1","reason":"bad","at":"2026-01-02T03:04:05Z"}`, holdDecode, true},
		{"grant", `{"module":"web","fingerprint":"f1","at":"2026-01-02T03:04:05Z"}`, grantDecode, true},
		{"want", `{"fingerprint":"f1","digest":"` + digest + `","owner":"put:op-1","at":"2026-01-02T03:04:05Z"}`, wantDecode, true},
		{"want of a bad owner", `{"fingerprint":"f1","digest":"` + digest + `","owner":"someone","at":"2026-01-02T03:04:05Z"}`, wantDecode, false},
		{"want of a bad digest", `{"fingerprint":"f1","digest":"md5:00","owner":"rules","at":"2026-01-02T03:04:05Z"}`, wantDecode, false},
		{"want twice named", `{"fingerprint":"f1","fingerprint":"f2","digest":"` + digest + `","owner":"rules","at":"2026-01-02T03:04:05Z"}`, wantDecode, false},
		{"have", `{"fingerprint":"f1","digest":"` + digest + `","phase":"running","health":"healthy","at":"2026-01-02T03:04:05Z"}`, haveDecode, true},
		{"have rolled back", `{"fingerprint":"f1","digest":"` + digest + `","phase":"rolled-back","health":"healthy","reason":"f2 failed","attempt":{"fingerprint":"f2","digest":"` + digest + `"},"at":"2026-01-02T03:04:05Z"}`, haveDecode, true},
		{"have of an attempt without a digest", `{"fingerprint":"f1","digest":"` + digest + `","phase":"applying","health":"healthy","attempt":{"fingerprint":"f2","digest":""},"at":"2026-01-02T03:04:05Z"}`, haveDecode, false},
		{"have of an attempt with an unknown field", `{"fingerprint":"f1","digest":"` + digest + `","phase":"applying","health":"healthy","attempt":{"fingerprint":"f2","digest":"` + digest + `","x":1},"at":"2026-01-02T03:04:05Z"}`, haveDecode, false},
		{"have of a bad phase", `{"fingerprint":"f1","digest":"","phase":"sleeping","health":"healthy","at":"2026-01-02T03:04:05Z"}`, haveDecode, false},
		{"composed inline", `{"module":"web","fingerprint":"f1","node":"n1","digest":"` + digest + `","envelope":"YWJj","size":3}`, composedDecode, true},
		{"composed of a wrong size", `{"module":"web","fingerprint":"f1","node":"n1","digest":"` + digest + `","envelope":"YWJj","size":4}`, composedDecode, false},
		{"composed of both", `{"module":"web","fingerprint":"f1","node":"n1","digest":"` + digest + `","envelope":"YWJj","object":"o","size":3}`, composedDecode, false},
		{"composed of neither", `{"module":"web","fingerprint":"f1","node":"n1","digest":"` + digest + `","size":3}`, composedDecode, false},
		{"not JSON", `{`, wantDecode, false},
	}
	for _, c := range cases {
		err := c.decode([]byte(c.raw))
		if (err == nil) != c.ok {
			t.Errorf("%s: error %v, want ok %v", c.what, err, c.ok)
		}
	}
}

func regDecode(b []byte) error      { _, err := DecodeRegistration(b); return err }
func buildDecode(b []byte) error    { _, err := DecodeBuild(b); return err }
func holdDecode(b []byte) error     { _, err := DecodeHold(b); return err }
func grantDecode(b []byte) error    { _, err := DecodeGrant(b); return err }
func wantDecode(b []byte) error     { _, err := DecodeWant(b); return err }
func haveDecode(b []byte) error     { _, err := DecodeHave(b); return err }
func composedDecode(b []byte) error { _, err := DecodeComposed(b); return err }

func TestEncodeDecodesBack(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := Want{Fingerprint: "f1", Digest: Digest([]byte("x")), Owner: OwnerRules, At: at}
	got, err := DecodeWant(Encode(w))
	if err != nil || got != w {
		t.Fatalf("want decoded as %+v %v", got, err)
	}
	r := Registration{Module: "web", Nodes: []string{"n1"}, Providers: []string{}, Step: 2}
	if back, err := DecodeRegistration(Encode(r)); err != nil || back.Step != 2 || back.Nodes[0] != "n1" {
		t.Fatalf("registration decoded as %+v %v", back, err)
	}
}

// FuzzDecode holds every decoder of the bus's documents to never panicking,
// and to giving back, for what it takes, a document that decodes again.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"module":"web","nodes":["n1"],"providers":[],"holdsData":false}`))
	f.Add([]byte(`{"fingerprint":"f1","digest":"sha256:` + strings.Repeat("0", 64) + `","owner":"rules","at":"2026-01-02T03:04:05Z"}`))
	f.Add([]byte(`{"module":"web","fingerprint":"f1","node":"n1","digest":"sha256:` + strings.Repeat("0", 64) + `","envelope":"YWJj","size":3}`))
	f.Add([]byte(`{"fingerprint":"f1","digest":"","phase":"rolled-back","health":"healthy","attempt":{"fingerprint":"f2","digest":"sha256:` + strings.Repeat("0", 64) + `"},"at":"2026-01-02T03:04:05Z"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if r, err := DecodeRegistration(raw); err == nil {
			if _, err := DecodeRegistration(Encode(r)); err != nil {
				t.Fatalf("registration %+v does not decode again: %v", r, err)
			}
		}
		if w, err := DecodeWant(raw); err == nil {
			if _, err := DecodeWant(Encode(w)); err != nil {
				t.Fatalf("want %+v does not decode again: %v", w, err)
			}
		}
		_, _ = DecodeBuild(raw)
		_, _ = DecodeHold(raw)
		_, _ = DecodeGrant(raw)
		if h, err := DecodeHave(raw); err == nil {
			if _, err := DecodeHave(Encode(h)); err != nil {
				t.Fatalf("have %+v does not decode again: %v", h, err)
			}
		}
		_, _ = DecodeComposed(raw)
	})
}
