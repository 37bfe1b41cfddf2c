package cli

import (
	"runtime"
	"runtime/debug"
)

// The version and commit a build stamps with -ldflags -X (the Makefile,
// tools/images and deploy/Dockerfile do): a release's tag, which Go's own
// record cannot give (a build inside the checkout records "(devel)" or a
// pseudo-version), and the commit where the build has no .git to read.
// Empty where the build stamped nothing; then Go's record speaks.
var (
	version string
	commit  string
)

// The symbols -ldflags -X sets, for the builds that stamp them.
const (
	VersionSymbol = "github.com/JorisJonkers-dev/delivery/internal/cli.version"
	CommitSymbol  = "github.com/JorisJonkers-dev/delivery/internal/cli.commit"
)

// LDFlags are the -X flags that stamp a version and a commit, for a go build's
// -ldflags; an empty value stamps nothing, and Go's record speaks for it.
func LDFlags(version, commit string) []string {
	var flags []string
	if version != "" {
		flags = append(flags, "-X", VersionSymbol+"="+version)
	}
	if commit != "" {
		flags = append(flags, "-X", CommitSymbol+"="+commit)
	}
	return flags
}

// Build is what a binary says of itself on --version.
type Build struct {
	Version  string // the stamped tag, else the module version Go recorded, else "(devel)"
	Commit   string // the stamped commit, else the VCS revision Go recorded, else "unknown"
	Modified bool   // the checkout had changes Go saw (only where the commit is Go's own)
	Go       string // the Go toolchain that built it
	Platform string // <os>/<arch> it was built for
}

// Stamp is a version and commit set with -ldflags -X.
type Stamp struct{ Version, Commit string }

// BuildOf decides what a binary says of itself from what its build stamped,
// what Go recorded (nil where nothing), and the toolchain and platform. A
// stamp wins over Go's record: the stamp is the tag the release was cut as.
func BuildOf(stamped Stamp, info *debug.BuildInfo, goVersion, platform string) Build {
	b := Build{Version: "(devel)", Commit: "unknown", Go: goVersion, Platform: platform}
	if info != nil {
		if info.Main.Version != "" {
			b.Version = info.Main.Version
		}
		if info.GoVersion != "" {
			b.Go = info.GoVersion
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Commit = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
		// Another binary's platform is the one its build recorded.
		if goos, goarch := setting(info, "GOOS"), setting(info, "GOARCH"); goos != "" && goarch != "" {
			b.Platform = goos + "/" + goarch
		}
	}
	if stamped.Version != "" {
		b.Version = stamped.Version
	}
	if stamped.Commit != "" && stamped.Commit != b.Commit {
		// Go's modified flag speaks of its own commit, not of this one.
		b.Commit, b.Modified = stamped.Commit, false
	}
	return b
}

func setting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// String is the version and commit, "v1.4.0, commit 5c66207e", with
// " (modified)" where the checkout had changes.
func (b Build) String() string {
	line := b.Version + ", commit " + b.Commit
	if b.Modified {
		line += " (modified)"
	}
	return line
}

// Line is the whole of --version after the name: the version and commit,
// then the toolchain and the platform.
func (b Build) Line() string { return b.String() + ", " + b.Go + ", " + b.Platform }

// This is the running binary's Build.
func This() Build {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return BuildOf(Stamp{Version: version, Commit: commit}, info, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
}

// Version is the version and commit the binary was built from: the stamped
// tag where its build set one, else the module version Go recorded
// ("(devel)" for a build inside the repository), and "unknown" where no
// commit was recorded (a build with -buildvcs=false, or outside a checkout).
func Version() string { return This().String() }

// VersionLine is what --version prints: the binary's name, its version and
// commit, the Go toolchain and the platform.
func VersionLine(name string) string { return name + " " + This().Line() }
