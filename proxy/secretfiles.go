package proxy

import (
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/keyref"
)

// sessionSecretFileWarnings warns about the session store's secret files
// (the sealing keys, the Redis and Sentinel passwords) that users other
// than gmgate's may read, as the certificate store does for key files.
func sessionSecretFileWarnings(cfg *config.Config) []config.Problem {
	ss := cfg.SessionStore
	var out []config.Problem
	for _, f := range [][2]string{
		{"session_store.keys_file", ss.KeysFile},
		{"session_store.redis.password_file", ss.Redis.PasswordFile},
		{"session_store.redis.sentinel_password_file", ss.Redis.SentinelPasswordFile},
	} {
		if f[1] == "" {
			continue
		}
		if problem, fix := keyref.LooseMode(f[1], f[1]); problem != "" {
			out = append(out, cfg.Problem(f[0], problem, fix))
		}
	}
	return out
}
