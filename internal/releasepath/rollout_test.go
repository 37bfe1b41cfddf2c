package releasepath

import (
	"errors"
	"strings"
	"testing"
)

func TestRolloutOf(t *testing.T) {
	good := map[string]string{AnnotationRepository: "acme/auth", AnnotationVersion: "1.4.0", AnnotationDigest: pin,
		AnnotationURL: "https://auth.example", "other": "x"}
	r, err := RolloutOf(good)
	if err != nil || r.Repository.String() != "acme/auth" || r.Version != "1.4.0" || r.Digest != pin || r.URL != "https://auth.example" {
		t.Fatalf("%+v %v", r, err)
	}
	if r, err := RolloutOf(map[string]string{AnnotationRepository: "acme/auth", AnnotationVersion: "v2.0.0-rc.1+build.5", AnnotationDigest: pin}); err != nil || r.URL != "" {
		t.Fatalf("no URL: %+v %v", r, err)
	}
	if _, err := RolloutOf(map[string]string{"kustomize.toolkit.fluxcd.io/ssa": "IfNotPresent"}); !errors.Is(err, ErrNoRollout) {
		t.Fatalf("no annotations: %v", err)
	}
	for name, bad := range map[string]map[string]string{
		"no version":        {AnnotationRepository: "acme/auth", AnnotationDigest: pin},
		"no digest":         {AnnotationRepository: "acme/auth", AnnotationVersion: "1.0.0"},
		"a digest by tag":   {AnnotationRepository: "acme/auth", AnnotationVersion: "1.0.0", AnnotationDigest: "latest"},
		"no repository":     {AnnotationVersion: "1.0.0"},
		"not owner/name":    {AnnotationRepository: "acme", AnnotationVersion: "1.0.0"},
		"three parts":       {AnnotationRepository: "acme/auth/x", AnnotationVersion: "1.0.0"},
		"not a version":     {AnnotationRepository: "acme/auth", AnnotationVersion: "latest"},
		"URL not http":      {AnnotationRepository: "acme/auth", AnnotationVersion: "1.0.0", AnnotationURL: "ftp://x"},
		"a misspelled key":  {AnnotationRepository: "acme/auth", AnnotationVersion: "1.0.0", AnnotationPrefix + "ur1": "https://x"},
		"spaces in the URL": {AnnotationRepository: "acme/auth", AnnotationVersion: "1.0.0", AnnotationURL: "https://a b"},
	} {
		if _, err := RolloutOf(bad); err == nil || errors.Is(err, ErrNoRollout) {
			t.Errorf("%s: accepted (%v)", name, err)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error on two lines: %q", name, err)
		}
	}
}

func FuzzRolloutOf(f *testing.F) {
	f.Add("acme/auth", "1.4.0", "https://auth.example")
	f.Add("", "", "")
	f.Add("a/b/c", "v1", "http://")
	f.Fuzz(func(t *testing.T, repo, version, url string) {
		r, err := RolloutOf(map[string]string{AnnotationRepository: repo, AnnotationVersion: version, AnnotationDigest: pin, AnnotationURL: url})
		if err == nil && (r.Repository.String() != repo || r.Version != version || r.URL != url) {
			t.Fatalf("%q %q %q read as %+v", repo, version, url, r)
		}
	})
}
