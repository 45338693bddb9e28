package validate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/gmgate/gmgate/config"
)

const composeDir = "../compose"

func TestComposeFile(t *testing.T) {
	dir, err := filepath.Abs(composeDir)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// As docker compose config loads it: the Compose JSON schema,
	// anchors and merges, references to secrets and volumes.
	project, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  dir,
		ConfigFiles: []types.ConfigFile{{Filename: "compose.yaml", Content: data}},
		Environment: types.Mapping{},
	}, func(o *loader.Options) { o.SetProjectName("gmgate", true) })
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	cfgData, err := os.ReadFile(filepath.Join(dir, "gmgate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("deploy/compose/gmgate.yaml", cfgData)
	if err != nil {
		t.Fatalf("gmgate.yaml: %v", err)
	}
	replicas := 0
	for name, svc := range project.Services {
		if !strings.HasPrefix(name, "gmgate-") {
			continue
		}
		replicas++
		// Every file gmgate.yaml names is mounted into the replica.
		mounted := func(path string) bool {
			for _, v := range svc.Volumes {
				if path == v.Target || strings.HasPrefix(path, v.Target+"/") {
					return true
				}
			}
			for _, s := range svc.Secrets {
				if path == s.Target {
					return true
				}
			}
			return false
		}
		for _, f := range append(configFiles(cfg), svc.Command[2]) {
			if !mounted(f) {
				t.Errorf("service %s: %s is not mounted", name, f)
			}
		}
		if _, ok := svc.DependsOn["redis"]; !ok {
			t.Errorf("service %s does not wait for Redis", name)
		}
		// The image can be built from the repository as the file says.
		if svc.Build == nil || svc.Build.Dockerfile != "Dockerfile" {
			t.Errorf("service %s has no build of the repository's Dockerfile", name)
		} else if _, err := os.Stat(filepath.Join(svc.Build.Context, svc.Build.Dockerfile)); err != nil {
			t.Errorf("service %s: %v", name, err)
		}
	}
	// Every upstream target gmgate.yaml names is a service of the file.
	for name, u := range cfg.Upstreams {
		for _, target := range u.Targets {
			tu, err := config.ParseTarget(target)
			if err != nil {
				t.Errorf("upstreams.%s: %v", name, err)
				continue
			}
			if _, ok := project.Services[tu.Hostname()]; !ok {
				t.Errorf("upstreams.%s: target %s is not a service of compose.yaml", name, target)
			}
		}
	}
	if replicas != 3 {
		t.Errorf("%d gmgate replicas, want 3", replicas)
	}
	if _, ok := project.Services["redis"]; !ok || cfg.SessionStore.Redis.Addrs[0] != "redis:6379" {
		t.Errorf("gmgate.yaml does not point at the redis service: %v", cfg.SessionStore.Redis.Addrs)
	}
}
