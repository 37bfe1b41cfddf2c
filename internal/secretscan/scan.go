package secretscan

import (
	"bytes"
	"regexp"
)

// Kind names a shape of credential.
type Kind string

// The shapes Scan finds.
const (
	PrivateKey  Kind = "private key"
	GitHubToken Kind = "GitHub token"
	AWSKey      Kind = "AWS access key id"
	VaultToken  Kind = "Vault token"
)

// shapes are the patterns, each as its issuer documents the credential's
// form: a PEM block of any private key type; GitHub's prefixed tokens
// (personal ghp_, OAuth gho_, App installation ghs_, user-to-server ghu_,
// refresh ghr_, fine-grained github_pat_); an AWS access key id (AKIA long
// term, ASIA temporary); a Vault service, batch or recovery token (hvs.,
// hvb., hvr.). Each demands the length a real one has, so a prefix named in
// prose is not a finding.
var shapes = []struct {
	kind Kind
	re   *regexp.Regexp
}{
	{PrivateKey, regexp.MustCompile(`-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`)},
	{GitHubToken, regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{36,}|\bgithub_pat_[A-Za-z0-9_]{36,}`)},
	{AWSKey, regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`)},
	{VaultToken, regexp.MustCompile(`\bhv[sbr]\.[A-Za-z0-9_-]{24,}`)},
}

// Finding is one credential-shaped text: its line (from 1) and its shape.
// The text itself is not kept, so a report never repeats a secret.
type Finding struct {
	Line int
	Kind Kind
}

// Scan finds every credential-shaped text in content, in order of line.
func Scan(content []byte) []Finding {
	var found []Finding
	for i, line := range bytes.Split(content, []byte("\n")) {
		for _, s := range shapes {
			if s.re.Match(line) {
				found = append(found, Finding{Line: i + 1, Kind: s.kind})
			}
		}
	}
	return found
}
