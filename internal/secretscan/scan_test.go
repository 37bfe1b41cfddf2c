package secretscan

import (
	"strings"
	"testing"
)

// The samples are built at run time, so this file holds no text of the
// shapes it proves are caught.
func sample(parts ...string) string { return strings.Join(parts, "") }

func TestScanCatchesEachShape(t *testing.T) {
	alnum36 := strings.Repeat("aB3", 12)
	cases := []struct {
		name, line string
		want       Kind
	}{
		{"an RSA key", sample("-----BEGIN ", "RSA PRIVATE KEY-----"), PrivateKey},
		{"a PKCS #8 key", sample("    ", "-----BEGIN ", "PRIVATE KEY-----"), PrivateKey},
		{"an OpenSSH key", sample("-----BEGIN ", "OPENSSH PRIVATE KEY-----"), PrivateKey},
		{"an encrypted key", sample("-----BEGIN ", "ENCRYPTED PRIVATE KEY-----"), PrivateKey},
		{"a PGP key", sample("-----BEGIN ", "PGP PRIVATE KEY BLOCK-----"), PrivateKey},
		{"a personal access token", sample(`token = "`, "ghp", "_", alnum36, `"`), GitHubToken},
		{"an OAuth token", sample("gho", "_", alnum36), GitHubToken},
		{"an installation token", sample("Authorization: token ", "ghs", "_", alnum36), GitHubToken},
		{"a fine-grained token", sample("github", "_pat_", "11ABCDEFG0", strings.Repeat("x", 12), "_", alnum36, "yZ"), GitHubToken},
		{"an AWS access key id", sample("AWS_ACCESS_KEY_ID=", "AKIA", "Q3EXAMPLE7KEY0ID"), AWSKey},
		{"a temporary AWS key id", sample("ASIA", "Q3EXAMPLE7KEY0ID"), AWSKey},
		{"a Vault service token", sample("VAULT_TOKEN=", "hvs", ".", "CAESIJ", strings.Repeat("q", 24)), VaultToken},
		{"a Vault batch token", sample("hvb", ".", strings.Repeat("AAAAAQ", 5)), VaultToken},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Scan([]byte("first line\n" + tc.line + "\nlast line"))
			if len(got) == 0 || got[0].Kind != tc.want || got[0].Line != 2 {
				t.Fatalf("Scan found %v, want a %s on line 2", got, tc.want)
			}
		})
	}
}

func TestScanPassesWhatOnlyNamesAShape(t *testing.T) {
	for _, line := range []string{
		"a test finds the PEM block " + `"RSA PRIVATE KEY"` + " in no log",
		"-----BEGIN CERTIFICATE-----",
		"-----BEGIN PUBLIC KEY-----",
		`strings.HasPrefix(token, "ghs_")`,
		"ghs_forged",
		"a token under the github_pat_ prefix",
		"AKIA1234",
		"XAKIAQ3EXAMPLE7KEY0IDX",
		"the hvs. prefix names a Vault service token",
		`regexp.MustCompile("-----BEGIN [A-Z ]*PRIVATE KEY-----")`,
	} {
		if got := Scan([]byte(line)); len(got) != 0 {
			t.Errorf("Scan(%q) = %v, want nothing", line, got)
		}
	}
}
