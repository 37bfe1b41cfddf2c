package release

import (
	"fmt"
	"maps"
	"slices"
)

// ConfigsByName keys a namespace's ConfigMaps by name, as MovedConfigs
// reads them.
func ConfigsByName(cms []ConfigMap) map[string]ConfigMap {
	byName := make(map[string]ConfigMap, len(cms))
	for _, cm := range cms {
		byName[cm.Name] = cm
	}
	return byName
}

// MovedConfigs names the ConfigMaps target takes environment from, by
// reference or whole, whose data differs from the copy Flagger keeps for the
// primary (<name>-primary, which the primary refers to instead): Flagger
// copies a tracked ConfigMap's data only when it promotes, so a release that
// changes a ConfigMap alone leaves the pod template as it was, and a tick
// passes before Flagger's record shows it. A copy that is not there counts
// as moved; a ConfigMap the primary refers to by its own name is shared and
// cannot differ. configs are the namespace's ConfigMaps by name.
func MovedConfigs(target, primary Deployment, configs map[string]ConfigMap) []string {
	tracked := map[string]bool{}
	for _, pair := range [][2][]Container{{target.InitContainers, primary.InitContainers}, {target.Containers, primary.Containers}} {
		for i := range min(len(pair[0]), len(pair[1])) {
			for _, ref := range configRefs(pair[0][i], pair[1][i]) {
				tracked[ref] = true
			}
		}
	}
	var moved []string
	for name := range tracked {
		own, ownFound := configs[name]
		copied, copyFound := configs[name+PrimarySuffix]
		// Flagger copies data alone, never binaryData, so that is what is
		// compared.
		if !ownFound || !copyFound || !maps.Equal(own.Data, copied.Data) {
			moved = append(moved, name)
		}
	}
	slices.Sort(moved)
	return moved
}

// configRefs are the ConfigMaps a target container takes environment from
// that the primary's container refers to as Flagger's copy.
func configRefs(target, primary Container) []string {
	var out []string
	for i := range min(len(target.Env), len(primary.Env)) {
		w, g := target.Env[i].From, primary.Env[i].From
		if w != nil && g != nil && w.Kind == "configMap" && g.Name == w.Name+PrimarySuffix {
			out = append(out, w.Name)
		}
	}
	for i := range min(len(target.EnvFrom), len(primary.EnvFrom)) {
		w, g := target.EnvFrom[i], primary.EnvFrom[i]
		if w.Kind == "configMap" && g.Name == w.Name+PrimarySuffix {
			out = append(out, w.Name)
		}
	}
	return out
}

// SameProgram compares what two Deployments run, container by container:
// images, commands, arguments and environment. It returns "" when they are the
// same, or what differs first. Flagger renames the ConfigMaps and Secrets it
// tracks to <name>-primary in the primary, so a reference to X in the
// Deployment and to X-primary in the primary are the same.
func SameProgram(target, primary Deployment) string {
	if d := sameContainers("init container", target.InitContainers, primary.InitContainers); d != "" {
		return d
	}
	return sameContainers("container", target.Containers, primary.Containers)
}

func sameContainers(kind string, want, got []Container) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d %ss, primary has %d", len(want), kind, len(got))
	}
	for i := range want {
		w, g := want[i], got[i]
		switch {
		case w.Name != g.Name:
			return fmt.Sprintf("%s %d is %s, primary has %s", kind, i, w.Name, g.Name)
		case w.Image != g.Image:
			return fmt.Sprintf("%s %s image", kind, w.Name)
		case !slices.Equal(w.Command, g.Command):
			return fmt.Sprintf("%s %s command", kind, w.Name)
		case !slices.Equal(w.Args, g.Args):
			return fmt.Sprintf("%s %s arguments", kind, w.Name)
		case !sameEnv(w.Env, g.Env) || !sameEnvFrom(w.EnvFrom, g.EnvFrom):
			return fmt.Sprintf("%s %s environment", kind, w.Name)
		}
	}
	return ""
}

func sameEnv(want, got []EnvVar) bool {
	return slices.EqualFunc(want, got, func(w, g EnvVar) bool {
		if w.Name != g.Name || w.Value != g.Value || (w.From == nil) != (g.From == nil) {
			return false
		}
		return w.From == nil || sameSource(*w.From, *g.From)
	})
}

func sameEnvFrom(want, got []EnvSource) bool { return slices.EqualFunc(want, got, sameSource) }

func sameSource(w, g EnvSource) bool {
	if w.Kind != g.Kind || w.Key != g.Key || w.Prefix != g.Prefix {
		return false
	}
	if w.Name == g.Name {
		return true
	}
	tracked := w.Kind == "configMap" || w.Kind == "secret"
	return tracked && g.Name == w.Name+PrimarySuffix
}
