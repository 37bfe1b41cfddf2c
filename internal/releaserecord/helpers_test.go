package releaserecord_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"fmt"
	gohash "hash"
	"net/http"
	"os"
	"text/template"

	"sigs.k8s.io/yaml"
)

// asContent reads a custom event's content into out.
func asContent(content any, out any) error {
	raw, err := json.Marshal(content)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// hmacHex is the hex HMAC of body under key with alg, as Flux's
// generic-hmac provider signs; "" for an algorithm it does not use.
func hmacHex(alg string, key, body []byte) string {
	h := map[string]func() gohash.Hash{"sha256": sha256.New, "sha384": sha512.New384, "sha512": sha512.New}[alg]
	if h == nil {
		return ""
	}
	mac := hmac.New(h, key)
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// notificationBody reads the webhook body of a notification template from
// a notifications ConfigMap, parsed as the engines parse it, with toJson as
// sprig has it.
func notificationBody(file, key string) (*template.Template, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var cm struct {
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &cm); err != nil {
		return nil, err
	}
	var tmpl struct {
		Webhook map[string]struct {
			Method string `json:"method"`
			Body   string `json:"body"`
		} `json:"webhook"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data[key]), &tmpl); err != nil {
		return nil, err
	}
	hook, ok := tmpl.Webhook["release-record"]
	if !ok || hook.Method != http.MethodPost {
		return nil, fmt.Errorf("%s: no POST webhook release-record", key)
	}
	return template.New(key).Option("missingkey=zero").Funcs(template.FuncMap{"toJson": func(v any) string {
		out, _ := json.Marshal(v)
		return string(out)
	}}).Parse(hook.Body)
}
