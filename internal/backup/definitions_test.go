package backup

import (
	"os"
	"strings"
	"testing"
)

func TestParseDefinitions(t *testing.T) {
	valid, err := os.ReadFile("testdata/definitions.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDefinitions(valid)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Queues) != 1 || d.Bindings[0].RoutingKey != "order.*.created" || len(d.Policies) != 1 {
		t.Fatalf("decoded %+v", d)
	}
	const lists = `"users":[],"vhosts":[{"name":"/"}],"queues":[],"exchanges":[],"bindings":[]`
	cases := []struct{ name, body, want string }{
		{"not JSON", `<html>`, "not a JSON object"},
		{"an array", `[]`, "not a JSON object"},
		{"a list missing", `{"rabbit_version":"3.10.8","users":[],"vhosts":[],"queues":[],"exchanges":[]}`, `"bindings"`},
		{"a list that is not a list", `{"rabbit_version":"3.10.8","users":{},"vhosts":[],"queues":[],"exchanges":[],"bindings":[]}`, `"users"`},
		{"a wrong type inside", `{"rabbit_version":"3.10.8","users":[],"vhosts":[{"name":1}],"queues":[],"exchanges":[],"bindings":[]}`, "do not decode"},
		{"two documents", `{"rabbit_version":"3.10.8",` + lists + `} {}`, "not a JSON object"},
		{"no version", `{` + lists + `}`, "no broker version"},
		{"no vhost", `{"rabbit_version":"3.10.8","users":[],"vhosts":[],"queues":[],"exchanges":[],"bindings":[]}`, "no vhost"},
		{"a nameless user", `{"rabbitmq_version":"3.10.8","users":[{}],"vhosts":[{"name":"/"}],"queues":[],"exchanges":[],"bindings":[]}`, "user 0"},
		{"a nameless vhost", `{"rabbitmq_version":"3.10.8","users":[],"vhosts":[{"name":""}],"queues":[],"exchanges":[],"bindings":[]}`, "vhost 0"},
		{"a queue without vhost", `{"rabbitmq_version":"3.10.8","users":[],"vhosts":[{"name":"/"}],"queues":[{"name":"q"}],"exchanges":[],"bindings":[]}`, "queue 0"},
		{"an exchange without type", `{"rabbitmq_version":"3.10.8","users":[],"vhosts":[{"name":"/"}],"queues":[],"exchanges":[{"name":"e","vhost":"/"}],"bindings":[]}`, "exchange 0"},
		{"a binding to nowhere", `{"rabbitmq_version":"3.10.8","users":[],"vhosts":[{"name":"/"}],"queues":[],"exchanges":[],"bindings":[{"vhost":"/","destination":"q","destination_type":"topic"}]}`, "binding 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ParseDefinitions([]byte(c.body)); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	b := &tailBuffer{max: 10}
	for _, s := range []string{"first line\n", "second\n", "the cause\n"} {
		if _, err := b.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.String(); got != "the cause\n" {
		t.Fatalf("kept %q", got)
	}
	if got := lastLine("a\nb\n  c  \n"); got != "c" {
		t.Fatalf("lastLine = %q", got)
	}
	if got := firstLine([]byte(strings.Repeat("x", 300) + "\nmore")); len(got) != 200 {
		t.Fatalf("firstLine kept %d bytes", len(got))
	}
}
