package testenv

import (
	"slices"
	"testing"
)

func TestShellFieldsKeepsAQuotedCommentWhole(t *testing.T) {
	for _, c := range []struct {
		rule string
		want []string
	}{
		{`-i dlvnode0 ! -o dlvnode0 -m comment --comment "delivery-node guard" -j DROP`,
			[]string{"-i", "dlvnode0", "!", "-o", "dlvnode0", "-m", "comment", "--comment", "delivery-node guard", "-j", "DROP"}},
		{`-j KUBE-FORWARD`, []string{"-j", "KUBE-FORWARD"}},
		{`-m comment --comment "" -j KUBE-X`, []string{"-m", "comment", "--comment", "", "-j", "KUBE-X"}},
		{``, nil},
	} {
		if got := shellFields(c.rule); !slices.Equal(got, c.want) {
			t.Errorf("shellFields(%q) = %q, want %q", c.rule, got, c.want)
		}
	}
}

func TestUnescapeMountReadsOctalEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/dlvnode-1/kubelet`:     "/tmp/dlvnode-1/kubelet",
		`/tmp/dlvnode-1/a\040b`:      "/tmp/dlvnode-1/a b",
		`/tmp/dlvnode-1/tab\011here`: "/tmp/dlvnode-1/tab\there",
		`/tmp/dlvnode-1/not\9escape`: `/tmp/dlvnode-1/not\9escape`,
		`/tmp/dlvnode-1/trailing\04`: `/tmp/dlvnode-1/trailing\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPushedDigestReadsTheCLIsAnswer(t *testing.T) {
	digest := "sha256:" + "ab12" + "00000000000000000000000000000000000000000000000000000000000f"
	for out, want := range map[string]string{
		`{"url": "oci://r/x@` + digest + `", "repository": "r/x", "tag": "1", "digest": "` + digest + `"}`: digest,
		"► pushing artifact\n{\n  \"digest\": \"" + digest + "\"\n}\n":                                     digest,
		`{"digest": "md5:00"}`: "",
		`no answer`:            "",
		`{"digest": `:          "",
	} {
		if got := pushedDigest([]byte(out)); got != want {
			t.Errorf("pushedDigest(%q) = %q, want %q", out, got, want)
		}
	}
}
