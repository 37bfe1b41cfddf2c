package garagecatalog

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/JorisJonkers-dev/delivery/internal/testenv/fakegarage"
)

func TestGarageV2AgainstTheDouble(t *testing.T) {
	ctx := context.Background()
	g := fakegarage.New(t) // any request or answer off Garage's document fails the test
	api := NewGarageV2(g.URL+"/", g.Token, nil)

	heldID, heldSecret := g.HoldKey("media")
	keys, err := api.ListKeys(ctx)
	if err != nil || len(keys) != 1 || keys[0] != (KeySummary{ID: heldID, Name: "media"}) {
		t.Fatalf("ListKeys: %v %v", keys, err)
	}
	got, found, err := api.GetKeyInfo(ctx, heldID)
	if err != nil || !found || got.SecretAccessKey != heldSecret {
		t.Fatalf("GetKeyInfo: found %v, %v", found, err)
	}
	if _, found, err := api.GetKeyInfo(ctx, docKey.AccessKeyID); err != nil || found {
		t.Fatalf("GetKeyInfo of an absent key: found %v, %v", found, err)
	}

	if err := api.ImportKey(ctx, "knowledge", docKey); err != nil {
		t.Fatal(err)
	}
	if name, secret, _ := g.Key(docKey.AccessKeyID); name != "knowledge" || secret != docKey.SecretAccessKey {
		t.Errorf("imported as %q", name)
	}
	if err := api.ImportKey(ctx, "knowledge", docKey); !errors.Is(err, ErrExists) {
		t.Errorf("importing a held id: %v, want ErrExists", err)
	}

	if _, found, err := api.GetBucketInfo(ctx, "media-library"); err != nil || found {
		t.Fatalf("GetBucketInfo of an absent bucket: found %v, %v", found, err)
	}
	b, err := api.CreateBucket(ctx, "media-library")
	if err != nil || b.ID == "" {
		t.Fatalf("CreateBucket: %+v %v", b, err)
	}
	if _, err := api.CreateBucket(ctx, "media-library"); !errors.Is(err, ErrExists) {
		t.Errorf("creating a taken alias: %v, want ErrExists", err)
	}
	if err := api.AllowBucketKey(ctx, b.ID, heldID, Grant); err != nil {
		t.Fatal(err)
	}
	b, found, err = api.GetBucketInfo(ctx, "media-library")
	if err != nil || !found || b.Perms[heldID] != Grant {
		t.Fatalf("GetBucketInfo after the grant: %+v %v %v", b, found, err)
	}

	var apiErr *APIError
	if err := api.AllowBucketKey(ctx, b.ID, "GK"+strings.Repeat("0", 24), Grant); !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || apiErr.Code != "NoSuchAccessKey" {
		t.Errorf("allowing an absent key: %v", err)
	}
}

func TestGarageV2WrongTokenIsAnError(t *testing.T) {
	g := fakegarage.New(t)
	_, err := NewGarageV2(g.URL, "not-the-token", nil).ListKeys(context.Background())
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusForbidden {
		t.Fatalf("got %v, want a 403", err)
	}
	if strings.Contains(err.Error(), g.Token) || strings.Contains(err.Error(), "not-the-token") {
		t.Error("the error holds a token")
	}
}

// Answers Garage would never give still end the call with an error.
func TestGarageV2RefusesBrokenAnswers(t *testing.T) {
	cases := map[string]http.HandlerFunc{
		"not JSON": func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>")) },
		"error without Garage's body": func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		},
		"key without its secret": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"accessKeyId":"` + docKey.AccessKeyID + `"}`))
		},
		"too large": func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`"` + strings.Repeat("x", maxAnswerBytes) + `"`))
		},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			defer srv.Close()
			api := NewGarageV2(srv.URL, "t", srv.Client())
			if _, _, err := api.GetKeyInfo(context.Background(), docKey.AccessKeyID); err == nil {
				t.Error("GetKeyInfo accepted it")
			}
			if _, err := api.ListKeys(context.Background()); err == nil {
				t.Error("ListKeys accepted it")
			}
		})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.Close()
	api := NewGarageV2(srv.URL, "t", nil)
	if _, _, err := api.GetBucketInfo(context.Background(), "abc"); err == nil {
		t.Error("a Garage that does not answer is no error")
	}
	if _, err := api.CreateBucket(context.Background(), "abc"); err == nil {
		t.Error("a Garage that does not answer is no error")
	}
	if err := api.ImportKey(context.Background(), "p", docKey); err == nil || strings.Contains(err.Error(), docKey.SecretAccessKey) {
		t.Errorf("ImportKey to a Garage that does not answer: %v", err)
	}
}

func TestNewGarageChoosesTheVersion(t *testing.T) {
	if g, err := NewGarage(AdminAPI{Host: "g", Port: 3903, Scheme: "http", Version: "v2"}, "t", nil); err != nil || g == nil {
		t.Fatalf("v2: %v", err)
	}
	if _, err := NewGarage(AdminAPI{Host: "g", Port: 3903, Scheme: "http", Version: "v1"}, "t", nil); err == nil {
		t.Fatal("v1 is not spoken yet")
	}
}
