package githubapp

import (
	"fmt"
	"strings"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

// The variables FromEnv reads; every service acting as a GitHub App reads the same.
const (
	EnvAppID          = "GITHUB_APP_ID"
	EnvInstallationID = "GITHUB_APP_INSTALLATION_ID"
	EnvPrivateKey     = "GITHUB_APP_PRIVATE_KEY"
	EnvPrivateKeyFile = "GITHUB_APP_PRIVATE_KEY_FILE"
	EnvAPIURL         = "GITHUB_API_URL"
)

// Variables are the variables FromEnv reads, for a service's --help.
var Variables = []settings.Variable{
	{Name: EnvAppID, Default: settings.Required, Meaning: "the GitHub App's id"},
	{Name: EnvInstallationID, Default: settings.Required, Meaning: "the App's installation"},
	{Name: EnvPrivateKey, Default: "one of the two required", Meaning: "the App's private key, PEM"},
	{Name: EnvPrivateKeyFile, Default: settings.Unset, Meaning: "a file holding that key instead; setting both is an error"},
	{Name: EnvAPIURL, Default: DefaultAPIURL, Meaning: "the REST API root; for GitHub Enterprise Server https://<host>/api/v3"},
}

// FromEnv reads an App installation's variables: the App and installation
// ids, the private key inline or from a file (exactly one of the two), and
// optionally the API root for GitHub Enterprise. The error names the first
// variable that is missing or malformed; the key is checked here, so a bad
// one stops a binary at start.
func FromEnv(getenv func(string) string, readFile func(string) ([]byte, error)) (Config, error) {
	s := settings.New(getenv)
	cfg := Config{
		AppID:          s.Int64(EnvAppID),
		InstallationID: s.Int64(EnvInstallationID),
		APIURL:         s.String(EnvAPIURL, DefaultAPIURL),
	}
	if err := s.Err(); err != nil {
		return Config{}, err
	}
	if _, err := apiRoot(cfg.APIURL); err != nil {
		return Config{}, fmt.Errorf("%s: %w", EnvAPIURL, err)
	}
	inline, file := getenv(EnvPrivateKey), strings.TrimSpace(getenv(EnvPrivateKeyFile))
	name := EnvPrivateKey
	switch {
	case strings.TrimSpace(inline) != "" && file != "":
		return Config{}, fmt.Errorf("%s: set it or %s, not both", EnvPrivateKey, EnvPrivateKeyFile)
	case file != "":
		name = EnvPrivateKeyFile
		if strings.Contains(file, "-----BEGIN") || strings.ContainsAny(file, "\r\n") {
			// A key pasted where its file's path goes: an error quoting the
			// "path" would write the key to the log.
			return Config{}, fmt.Errorf("%s: holds a key, not a file's path (set %s for a key itself)", EnvPrivateKeyFile, EnvPrivateKey)
		}
		data, err := readFile(file)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", EnvPrivateKeyFile, err)
		}
		cfg.PrivateKey = data
	case strings.TrimSpace(inline) != "":
		cfg.PrivateKey = []byte(inline)
	default:
		return Config{}, fmt.Errorf("%s: required but not set (or set %s)", EnvPrivateKey, EnvPrivateKeyFile)
	}
	if _, err := New(cfg); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	return cfg, nil
}
