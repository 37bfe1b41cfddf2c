package garagecatalog

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// FuzzDecode feeds the catalog decoder arbitrary bytes: it must never panic,
// and whatever it accepts must be a catalog the run can act on safely.
func FuzzDecode(f *testing.F) {
	seed, err := os.ReadFile("testdata/catalog.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add([]byte(`{"adminApi":{"host":"g","port":1},"adminToken":{"path":"secret/data/g"},"keys":[]}`))
	f.Add([]byte(`{"adminApi":{"host":"g","port":1},"adminToken":{"path":"secret/data/g"},"keys":[{"project":"a","process":"b","buckets":["a.b-c"]}]}`))
	f.Add([]byte(`{"adminApi":{"host":"g","port":1e400}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := Decode(bytes.NewReader(in))
		if err != nil {
			return
		}
		if c.AdminAPI.Version != "v2" || c.AdminToken.Field == "" || c.AdminAPI.Port < 1 || c.AdminAPI.Port > 65535 {
			t.Fatalf("accepted an unusable catalog: %+v", c)
		}
		seen := map[string]bool{}
		for _, k := range c.Keys {
			if seen[k.Project] || len(k.Buckets) == 0 {
				t.Fatalf("accepted key %+v", k)
			}
			seen[k.Project] = true
			for _, s := range []string{k.Project, k.Process} {
				if s == "" || bytes.ContainsAny([]byte(s), "/.") {
					t.Fatalf("accepted a name that would change the Vault path: %q", s)
				}
			}
		}
		// What is accepted encodes and decodes to itself.
		raw, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Decode(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("a decoded catalog does not decode again: %v", err)
		}
		if again.AdminAPI != c.AdminAPI || again.AdminToken != c.AdminToken || len(again.Keys) != len(c.Keys) {
			t.Fatalf("round trip changed the catalog")
		}
	})
}
