package cli

import "runtime/debug"

// Version is the module version and the VCS commit the binary was built
// from, as Go recorded them: "(devel)" where the build had no module version
// (a build inside the repository) and "unknown" where it recorded no commit
// (a build with -buildvcs=false, or outside a checkout).
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return versionOf(info)
}

// VersionLine is what --version prints: the binary's name and its Version.
func VersionLine(name string) string { return name + " " + Version() }

func versionOf(info *debug.BuildInfo) string {
	version, commit, modified := "(devel)", "unknown", false
	if info != nil {
		if info.Main.Version != "" {
			version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	line := version + ", commit " + commit
	if modified {
		line += " (modified)"
	}
	return line
}
