package cli

import (
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/settings"
)

var service = Service{Name: "collector", Summary: "collector captures the cluster.", Variables: []settings.Variable{
	{Name: "CLUSTER_NAME", Default: settings.Required, Meaning: "the cluster the snapshot names"},
	{Name: "INTERVAL", Default: "10m", Meaning: "time between captures"},
	{Name: "ESTATE_BRANCH", Meaning: "the branch committed to"},
}}

func TestAnswer(t *testing.T) {
	cases := []struct {
		args           []string
		code           int
		answered       bool
		stdout, stderr string
	}{
		{nil, 0, false, "", ""},
		{[]string{"--help"}, 0, true, "Environment:\n  CLUSTER_NAME ", ""},
		{[]string{"-h"}, 0, true, "Usage:\n  collector [--help | --version]", ""},
		{[]string{"--version"}, 0, true, "collector (devel), commit ", ""},
		{[]string{"--verbose"}, 2, true, "", "collector: flag provided but not defined: -verbose\n\nUsage:"},
		{[]string{"start"}, 2, true, "", `collector: unexpected argument "start"`},
		{[]string{"--version=false"}, 0, false, "", ""},
	}
	for _, c := range cases {
		var stdout, stderr strings.Builder
		code, answered := service.Answer(c.args, &stdout, &stderr)
		if code != c.code || answered != c.answered {
			t.Errorf("%q: code %d answered %v, want %d %v", c.args, code, answered, c.code, c.answered)
		}
		if !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("%q: stdout %q stderr %q", c.args, stdout.String(), stderr.String())
		}
		if c.code == 2 && stdout.Len() > 0 {
			t.Errorf("%q: a mistake printed %q on stdout", c.args, stdout.String())
		}
	}
}

func TestHelpNamesEveryVariableWithItsDefault(t *testing.T) {
	var out strings.Builder
	service.Help(&out)
	for _, want := range []string{"collector captures the cluster.", "Environment:",
		"CLUSTER_NAME   required  the cluster the snapshot names",
		"INTERVAL       10m       time between captures",
		"ESTATE_BRANCH  unset     the branch committed to"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}

func TestBuildOf(t *testing.T) {
	vcs := func(version, revision, modified string, extra ...debug.BuildSetting) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: version}, Settings: append([]debug.BuildSetting{
			{Key: "vcs.revision", Value: revision}, {Key: "vcs.modified", Value: modified}}, extra...)}
	}
	arm := []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"}}
	for _, c := range []struct {
		name    string
		stamped Stamp
		info    *debug.BuildInfo
		want    string
	}{
		{"no record", Stamp{}, nil, "(devel), commit unknown, go1.25.9, linux/amd64"},
		{"an empty record", Stamp{}, &debug.BuildInfo{}, "(devel), commit unknown, go1.25.9, linux/amd64"},
		{"inside the repository", Stamp{}, &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel), commit unknown, go1.25.9, linux/amd64"},
		{"a module version", Stamp{}, vcs("v1.4.0", "5c66207e", "false"), "v1.4.0, commit 5c66207e, go1.26.0, linux/amd64"},
		{"a pseudo-version, modified", Stamp{}, vcs("v1.4.1-0.20261026031500-5c66207e", "5c66207e", "true"),
			"v1.4.1-0.20261026031500-5c66207e, commit 5c66207e (modified), go1.26.0, linux/amd64"},
		{"a release's tag over the pseudo-version", Stamp{Version: "v1.5.0"}, vcs("v1.4.1-0.20261026031500-5c66207e", "5c66207e", "false"),
			"v1.5.0, commit 5c66207e, go1.26.0, linux/amd64"},
		{"a tag and a commit, no .git", Stamp{Version: "v1.5.0", Commit: "9f8e7d6c"}, &debug.BuildInfo{GoVersion: "go1.26.0"},
			"v1.5.0, commit 9f8e7d6c, go1.26.0, linux/amd64"},
		{"a stamped commit that is not Go's is not Go's modified one", Stamp{Commit: "9f8e7d6c"}, vcs("(devel)", "5c66207e", "true"),
			"(devel), commit 9f8e7d6c, go1.26.0, linux/amd64"},
		{"the same commit keeps Go's modified", Stamp{Commit: "5c66207e"}, vcs("(devel)", "5c66207e", "true"),
			"(devel), commit 5c66207e (modified), go1.26.0, linux/amd64"},
		{"the platform the build recorded", Stamp{Version: "v1.5.0"}, vcs("(devel)", "5c66207e", "false", arm...),
			"v1.5.0, commit 5c66207e, go1.26.0, linux/arm64"},
	} {
		if got := BuildOf(c.stamped, c.info, "go1.25.9", "linux/amd64").Line(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestLDFlags(t *testing.T) {
	for _, c := range []struct {
		version, commit string
		want            string
	}{
		{"", "", ""},
		{"v1.5.0", "", "-X " + VersionSymbol + "=v1.5.0"},
		{"", "9f8e7d6c", "-X " + CommitSymbol + "=9f8e7d6c"},
		{"v1.5.0", "9f8e7d6c", "-X " + VersionSymbol + "=v1.5.0 -X " + CommitSymbol + "=9f8e7d6c"},
	} {
		if got := strings.Join(LDFlags(c.version, c.commit), " "); got != c.want {
			t.Errorf("LDFlags(%q, %q) = %q, want %q", c.version, c.commit, got, c.want)
		}
	}
}

func TestVersionLine(t *testing.T) {
	got := VersionLine("backup")
	for _, want := range []string{"backup ", ", commit ", ", " + runtime.Version() + ", ", ", " + runtime.GOOS + "/" + runtime.GOARCH} {
		if !strings.Contains(got, want) {
			t.Errorf("VersionLine = %q, no %q", got, want)
		}
	}
	if !strings.HasPrefix(got, "backup "+Version()+", ") {
		t.Errorf("VersionLine = %q, want it to begin with the name and Version %q", got, Version())
	}
}
