package release

import (
	"slices"
	"strings"
	"testing"
)

func TestSameProgram(t *testing.T) {
	cmRef := func(name string) EnvVar {
		return EnvVar{Name: "C", From: &EnvSource{Kind: "configMap", Name: name, Key: "k"}}
	}
	fieldRef := func(name string) EnvVar { return EnvVar{Name: "F", From: &EnvSource{Kind: "field", Name: name}} }
	base := container("img:1", EnvVar{Name: "A", Value: "1"})
	cases := []struct {
		name            string
		target, primary []Container
		diff            string
	}{
		{"the same program", []Container{base}, []Container{base}, ""},
		{"another image", []Container{base}, []Container{container("img:2", EnvVar{Name: "A", Value: "1"})}, "image"},
		{"another command", []Container{base}, []Container{{Name: "app", Image: "img:1", Command: []string{"/other"}, Args: []string{"serve"}, Env: base.Env}}, "command"},
		{"other arguments", []Container{base}, []Container{{Name: "app", Image: "img:1", Command: []string{"/app"}, Env: base.Env}}, "arguments"},
		{"another environment", []Container{base}, []Container{container("img:1", EnvVar{Name: "A", Value: "2"})}, "environment"},
		{"a tracked ConfigMap renamed by Flagger", []Container{container("i", cmRef("cfg"))}, []Container{container("i", cmRef("cfg-primary"))}, ""},
		{"another ConfigMap", []Container{container("i", cmRef("cfg"))}, []Container{container("i", cmRef("other"))}, "environment"},
		{"a field reference is never renamed", []Container{container("i", fieldRef("a"))}, []Container{container("i", fieldRef("a-primary"))}, "environment"},
		{"a literal against a reference", []Container{container("i", EnvVar{Name: "C"})}, []Container{container("i", cmRef("cfg"))}, "environment"},
		{"envFrom renamed by Flagger", []Container{{Name: "app", EnvFrom: []EnvSource{{Kind: "secret", Name: "s"}}}}, []Container{{Name: "app", EnvFrom: []EnvSource{{Kind: "secret", Name: "s-primary"}}}}, ""},
		{"envFrom of another Secret", []Container{{Name: "app", EnvFrom: []EnvSource{{Kind: "secret", Name: "s"}}}}, []Container{{Name: "app", EnvFrom: []EnvSource{{Kind: "secret", Name: "t"}}}}, "environment"},
		{"another container count", []Container{base}, []Container{base, base}, "1 containers, primary has 2"},
		{"containers in another order", []Container{base, {Name: "side"}}, []Container{{Name: "side"}, base}, "container 0 is app"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := SameProgram(Deployment{Containers: c.target}, Deployment{Containers: c.primary})
			if (got == "") != (c.diff == "") || !strings.Contains(got, c.diff) {
				t.Fatalf("SameProgram = %q, want %q", got, c.diff)
			}
		})
	}
	if d := SameProgram(Deployment{InitContainers: []Container{base}}, Deployment{}); !strings.Contains(d, "init container") {
		t.Fatalf("init containers not compared: %q", d)
	}
}

func TestMovedConfigs(t *testing.T) {
	ref := func(name string) EnvVar {
		return EnvVar{Name: "C", From: &EnvSource{Kind: "configMap", Name: name, Key: "k"}}
	}
	whole := func(name string) Container {
		c := container("ui:1")
		c.EnvFrom = []EnvSource{{Kind: "configMap", Name: name}}
		return c
	}
	cm := func(name, mode string) ConfigMap { return ConfigMap{Name: name, Data: map[string]string{"MODE": mode}} }
	target, primary := deployment("ui", container("ui:1", ref("ui-env"))), deployment("ui-primary", container("ui:1", ref("ui-env-primary")))
	for _, c := range []struct {
		name            string
		target, primary *Deployment
		configs         []ConfigMap
		want            []string
	}{
		{"the copy holds what the ConfigMap holds", target, primary, []ConfigMap{cm("ui-env", "lite"), cm("ui-env-primary", "lite")}, nil},
		{"a key changed since the promotion", target, primary, []ConfigMap{cm("ui-env", "full"), cm("ui-env-primary", "lite")}, []string{"ui-env"}},
		{"binary data, which Flagger does not copy, is no change", target, primary, []ConfigMap{
			{Name: "ui-env", Data: map[string]string{"MODE": "lite"}, BinaryData: map[string][]byte{"cert": {1}}},
			{Name: "ui-env-primary", Data: map[string]string{"MODE": "lite"}}}, nil},
		{"no copy yet", target, primary, []ConfigMap{cm("ui-env", "full")}, []string{"ui-env"}},
		{"taken whole (envFrom)", deployment("ui", whole("ui-env")), deployment("ui-primary", whole("ui-env-primary")),
			[]ConfigMap{cm("ui-env", "full"), cm("ui-env-primary", "lite")}, []string{"ui-env"}},
		{"shared, not tracked: one ConfigMap for both", target, deployment("ui-primary", container("ui:1", ref("ui-env"))),
			[]ConfigMap{cm("ui-env", "full")}, nil},
	} {
		if got := MovedConfigs(*c.target, *c.primary, ConfigsByName(c.configs)); !slices.Equal(got, c.want) {
			t.Errorf("%s: moved %q, want %q", c.name, got, c.want)
		}
	}
	m := unchangedUI()
	m.MovedConfigs = []string{"ui-env"}
	if same, why := Unchanged(m); same || !strings.Contains(why, "configMap ui-env changed") {
		t.Errorf("a member whose ConfigMap moved: unchanged %v (%s)", same, why)
	}
}
