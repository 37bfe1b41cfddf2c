package postgrescatalog

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// plainName is what every accepted identifier must be: nothing pgx's
// sanitising would have to escape, and short enough for PostgreSQL.
var plainName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// FuzzDecode feeds the decoder any bytes. Whatever it accepts must name
// only derived, plain identifiers that PostgreSQL reads as written.
func FuzzDecode(f *testing.F) {
	for _, dir := range []string{"testdata", filepath.Join("testdata", "refusals")} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() {
				continue
			}
			raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := Decode(raw)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, p := range c.Projects {
			if p != Entry(p.Project, c.Vault.Mount) || seen[p.Project] {
				t.Fatalf("accepted %+v", p)
			}
			seen[p.Project] = true
			for _, name := range []string{p.Database, p.OwnerRole, p.DataRole} {
				if !plainName.MatchString(name) || ident(name) != `"`+name+`"` {
					t.Fatalf("accepted identifier %q", name)
				}
			}
		}
		if strings.ContainsAny(c.AdminPath+c.Vault.Mount+c.Vault.Connection, "\"' *{}+\n") {
			t.Fatalf("accepted Vault names %q %q %q", c.AdminPath, c.Vault.Mount, c.Vault.Connection)
		}
		switch c.Server.SSLMode {
		case "disable", "require", "verify-ca", "verify-full":
		default:
			t.Fatalf("accepted sslmode %q", c.Server.SSLMode)
		}
	})
}
