package publish

import (
	"bytes"
	"debug/buildinfo"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/package-url/packageurl-go"
	spdxjson "github.com/spdx/tools-golang/json"
	"github.com/spdx/tools-golang/spdx/v2/common"
	spdx "github.com/spdx/tools-golang/spdx/v2/v2_3"

	"github.com/JorisJonkers-dev/delivery/internal/ociimage"
)

// PredicateSPDX is the in-toto predicate type an SPDX SBOM is attested
// under, the one cosign verify-attestation --type spdxjson looks for.
const PredicateSPDX = "https://spdx.dev/Document"

// SBOMSubject is the image an SBOM describes.
type SBOMSubject struct {
	Name      string
	Version   string
	Ref       name.Digest
	Platforms []v1.Platform
}

// SBOM is the SPDX 2.3 document, as JSON, of the image whose binary is at
// binary: the image as the package it describes, and in it the Go
// toolchain's standard library, the module the binary was built from and
// every module Go linked into it, each with its purl and the checksum Go
// recorded.
//
// It is read from the binary's own build record rather than by a scanner:
// these images hold one static Go binary and a CA bundle, no package
// manager's database, and Go's record is the exact list a scanner would
// derive from that binary. spdx/tools-golang writes the document.
func SBOM(binary string, s SBOMSubject, created time.Time) ([]byte, error) {
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("SBOM of %s: read its build: %w", s.Name, err)
	}
	image := &spdx.Package{
		PackageName:             s.Name,
		PackageSPDXIdentifier:   "Image",
		PackageVersion:          s.Version,
		PackageDownloadLocation: s.Ref.String(),
		PrimaryPackagePurpose:   "CONTAINER",
		PackageSupplier:         &common.Supplier{Supplier: "NOASSERTION"},
		PackageLicenseConcluded: "NOASSERTION",
		PackageLicenseDeclared:  "NOASSERTION",
		PackageCopyrightText:    "NOASSERTION",
		PackageChecksums:        []common.Checksum{{Algorithm: common.SHA256, Value: s.Ref.DigestStr()[len("sha256:"):]}},
		PackageExternalReferences: []*spdx.PackageExternalReference{{
			Category: "PACKAGE-MANAGER", RefType: "purl",
			Locator: packageurl.NewPackageURL(packageurl.TypeOCI, "", s.Name, s.Ref.DigestStr(),
				packageurl.QualifiersFromMap(map[string]string{"repository_url": s.Ref.Context().Name(), "tag": s.Version}), "").ToString(),
		}},
		PackageComment: "built for " + platforms(s.Platforms) + " from " + ociimage.Source,
	}
	doc := &spdx.Document{
		SPDXVersion:       spdx.Version,
		DataLicense:       spdx.DataLicense,
		SPDXIdentifier:    "DOCUMENT",
		DocumentName:      s.Name + "-" + s.Version,
		DocumentNamespace: ociimage.Source + "/sbom/" + s.Name + "/" + s.Version + "/" + s.Ref.DigestStr(),
		CreationInfo: &spdx.CreationInfo{
			Creators: []common.Creator{{CreatorType: "Tool", Creator: "delivery-release-" + s.Version}},
			Created:  created.UTC().Format(time.RFC3339),
		},
		Packages: []*spdx.Package{image},
		Relationships: []*spdx.Relationship{{
			RefA: common.MakeDocElementID("", "DOCUMENT"), RefB: common.MakeDocElementID("", "Image"), Relationship: "DESCRIBES",
		}},
	}
	add := func(id, pkgName, version, sum, purl string) {
		p := &spdx.Package{
			PackageName: pkgName, PackageSPDXIdentifier: common.ElementID(id), PackageVersion: version,
			PackageDownloadLocation: "NOASSERTION", PackageSupplier: &common.Supplier{Supplier: "NOASSERTION"},
			PackageLicenseConcluded: "NOASSERTION", PackageLicenseDeclared: "NOASSERTION", PackageCopyrightText: "NOASSERTION",
			PrimaryPackagePurpose:     "LIBRARY",
			PackageExternalReferences: []*spdx.PackageExternalReference{{Category: "PACKAGE-MANAGER", RefType: "purl", Locator: purl}},
		}
		if h, ok := moduleSum(sum); ok {
			p.PackageChecksums = []common.Checksum{{Algorithm: common.SHA256, Value: h}}
		}
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, &spdx.Relationship{
			RefA: common.MakeDocElementID("", "Image"), RefB: common.MakeDocElementID("", id), Relationship: "CONTAINS",
		})
	}
	goVersion := strings.TrimPrefix(info.GoVersion, "go")
	add("Go-stdlib", "stdlib", goVersion, "", golangPURL("stdlib", goVersion))
	add("Module-main", info.Main.Path, s.Version, "", golangPURL(info.Main.Path, s.Version))
	for i, m := range info.Deps {
		if m.Replace != nil {
			m = m.Replace
		}
		add(fmt.Sprintf("Module-%d", i+1), m.Path, m.Version, m.Sum, golangPURL(m.Path, m.Version))
	}
	var out bytes.Buffer
	if err := spdxjson.Write(doc, &out, spdxjson.Indent("  ")); err != nil {
		return nil, fmt.Errorf("SBOM of %s: %w", s.Name, err)
	}
	return out.Bytes(), nil
}

// golangPURL is a Go module's package URL, its path split as the purl
// spec's golang type says: the last element is the name.
func golangPURL(path, version string) string {
	namespace, pkgName := "", path
	if i := strings.LastIndex(path, "/"); i >= 0 {
		namespace, pkgName = path[:i], path[i+1:]
	}
	return packageurl.NewPackageURL(packageurl.TypeGolang, namespace, pkgName, version, nil, "").ToString()
}

// h1 is the form of a module's checksum in go.sum and in a build record.
var h1 = regexp.MustCompile(`^h1:([A-Za-z0-9+/]{43}=)$`)

// moduleSum is a module's h1: checksum as SPDX's hex SHA256: Go's h1 is
// the base64 SHA-256 of the module's file hashes.
func moduleSum(sum string) (string, bool) {
	m := h1.FindStringSubmatch(sum)
	if m == nil {
		return "", false
	}
	raw, err := base64.StdEncoding.DecodeString(m[1])
	if err != nil || len(raw) != 32 {
		return "", false
	}
	return fmt.Sprintf("%x", raw), true
}

func platforms(ps []v1.Platform) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.OS + "/" + p.Architecture
	}
	return strings.Join(names, " and ")
}
