package cli

import (
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

func TestVersionOf(t *testing.T) {
	tagged := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "5c66207e"}, {Key: "vcs.modified", Value: "false"}}}
	modified := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.1-0.20261026031500-5c66207e"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "5c66207e"}, {Key: "vcs.modified", Value: "true"}}}
	for _, c := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{nil, "(devel), commit unknown"},
		{&debug.BuildInfo{}, "(devel), commit unknown"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel), commit unknown"},
		{tagged, "v1.4.0, commit 5c66207e"},
		{modified, "v1.4.1-0.20261026031500-5c66207e, commit 5c66207e (modified)"},
	} {
		if got := versionOf(c.info); got != c.want {
			t.Errorf("versionOf(%v) = %q, want %q", c.info, got, c.want)
		}
	}
	if got := VersionLine("backup"); !strings.HasPrefix(got, "backup ") || !strings.Contains(got, ", commit ") {
		t.Errorf("VersionLine = %q", got)
	}
}
