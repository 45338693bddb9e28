package proxy

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gmgate/gmgate/certs/acme"
	"github.com/gmgate/gmgate/config"
	"github.com/gmgate/gmgate/internal/sessionstore"
	"github.com/gmgate/gmgate/internal/upstream"
	"github.com/gmgate/gmgate/tlcp"
	"github.com/redis/go-redis/v9"
)

// sharedStore is the session store of a generation: what the replicas
// share through Redis. A reload that changes neither the session_store
// section nor the keys keeps it, with its connections.
type sharedStore struct {
	spec  config.SessionStore
	keys  *sessionstore.Keys
	store *sessionstore.Store
	// id tells stores apart, so that an ACME manager on a store that a
	// reload replaced is replaced too.
	id uint64
}

var sharedStoreIDs atomic.Uint64

// sessionStore builds the session store of cfg, or reuses prev's. When
// checking, the keys, password and TLS files are read but no store is
// made; unless offline, Redis is asked once whether it answers, and a
// silence is a warning (a replica serves without Redis).
func (s *Server) sessionStore(cfg *config.Config, prev *generation, bo buildOptions) (_ *sharedStore, _ []config.Problem, warnings []config.Problem) {
	ss := cfg.SessionStore
	if ss == nil || ss.Redis == nil {
		return nil, nil, nil
	}
	defer func() { warnings = append(sessionSecretFileWarnings(cfg), warnings...) }()
	if bo.offline {
		// The TLS files are read, the client key's reference too; no
		// secret is.
		if ss.Redis.TLS != nil {
			if _, err := upstream.TLSConfig(ss.Redis.TLS, true); err != nil {
				return nil, []config.Problem{redisProblem(cfg, err)}, nil
			}
		}
		return nil, nil, nil
	}
	var probs []config.Problem
	keys, err := sessionstore.LoadKeys(ss.KeysFile, ss.KeysEnv)
	if err != nil {
		field := "session_store.keys_file"
		if ss.KeysFile == "" {
			field = "session_store.keys_env"
		}
		probs = append(probs, cfg.Problem(field, err.Error(), "write one key of 64 hexadecimal digits per line (openssl rand -hex 32)"))
	}
	opts, err := redisOptions(ss.Redis)
	if err != nil {
		probs = append(probs, redisProblem(cfg, err))
	}
	if len(probs) > 0 {
		return nil, probs, nil
	}
	if prev != nil && prev.shared != nil && reflect.DeepEqual(prev.shared.spec, *ss) && prev.shared.keys.Equal(keys) {
		return prev.shared, nil, nil
	}
	client := redis.NewUniversalClient(opts)
	if bo.check {
		defer client.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := client.Ping(ctx).Err(); err != nil {
			fix := "start Redis, or check addrs, username, password and tls"
			if ss.Redis.MasterName != "" {
				fix = "start Redis, or check addrs (the Sentinels), master_name, the usernames and passwords, and tls"
			}
			return nil, nil, []config.Problem{cfg.Problem("session_store.redis.addrs", "Redis does not answer ("+err.Error()+"); replicas serve without it, each with its own sessions", fix)}
		}
		if err := tryWrite(ctx, client, ss.Redis.KeyPrefix); err != nil {
			return nil, nil, []config.Problem{writeProblem(cfg, ss.Redis, err)}
		}
		return nil, nil, nil
	}
	store := sessionstore.New(sessionstore.Options{
		Client:   client,
		Keys:     keys,
		Prefix:   ss.Redis.KeyPrefix,
		Timeout:  ss.Redis.Timeout.D(),
		Logger:   s.log.With("component", "session_store"),
		Observer: s.metrics.StoreObserver(),
	})
	return &sharedStore{spec: *ss, keys: keys, store: store, id: sharedStoreIDs.Add(1)}, nil, nil
}

// tryWrite writes a key under the prefix, reads it back and deletes it, as
// the store does with sessions: a Redis can answer PING and still refuse
// every session (a user without those rights, a read-only replica, a
// Redis out of memory).
func tryWrite(ctx context.Context, c redis.UniversalClient, prefix string) error {
	key := prefix + "check:" + hex.EncodeToString(randomBytes(8))
	if err := c.Set(ctx, key, "config check", 10*time.Second).Err(); err != nil {
		return err
	}
	if err := c.Get(ctx, key).Err(); err != nil {
		return err
	}
	return c.Del(ctx, key).Err()
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// writeProblem says why Redis refused tryWrite's commands, and the fix.
func writeProblem(cfg *config.Config, r *config.Redis, err error) config.Problem {
	const shared = "; replicas serve without sharing sessions"
	switch {
	case redis.HasErrorPrefix(err, "NOPERM"):
		user := r.Username
		if user == "" {
			user = "default"
		}
		return cfg.Problem("session_store.redis.username", fmt.Sprintf("Redis refuses the session commands to user %q (%v)%s", user, err, shared),
			fmt.Sprintf("grant that user reads and writes of keys under %q (ACL SETUSER %s ~%s* +@read +@write +@connection, and +@scripting for tls.acme.shared)", r.KeyPrefix, user, r.KeyPrefix))
	case redis.HasErrorPrefix(err, "READONLY"):
		return cfg.Problem("session_store.redis.addrs", fmt.Sprintf("the Redis at %s is a read-only replica (%v)%s", strings.Join(r.Addrs, ", "), err, shared),
			"name its master, or its Sentinels with master_name")
	case redis.IsOOMError(err):
		return cfg.Problem("session_store.redis.addrs", fmt.Sprintf("Redis is out of memory and refuses new sessions (%v); sessions already in it still resume", err),
			"raise its maxmemory, or set its maxmemory-policy to volatile-ttl")
	}
	return cfg.Problem("session_store.redis.addrs", fmt.Sprintf("Redis answers PING but not a session's write (%v)%s", err, shared), "check the Redis log")
}

// redisProblem places an error of the redis section at its field.
func redisProblem(cfg *config.Config, err error) config.Problem {
	return cfg.ProblemAt("session_store.redis", err, "")
}

// redisOptions turns the redis section into go-redis options: one address
// is a server, several the nodes of a Redis Cluster, and with master_name
// they are the Sentinels that say where the master is. Requests are not
// retried (a lookup has one short timeout) and honour their context's
// deadline.
func redisOptions(r *config.Redis) (*redis.UniversalOptions, error) {
	opts := &redis.UniversalOptions{
		Addrs:                 r.Addrs,
		Username:              r.Username,
		DB:                    r.DB,
		MaxRetries:            -1,
		ContextTimeoutEnabled: true,
		DialTimeout:           2 * time.Second,
		// Connections ready for the first lookups after a start.
		MinIdleConns: 2,
	}
	var err error
	if opts.Password, err = secret("password", r.PasswordEnv, r.PasswordFile); err != nil {
		return nil, err
	}
	if r.MasterName != "" {
		opts.MasterName = r.MasterName
		opts.SentinelUsername = r.SentinelUsername
		if opts.SentinelPassword, err = secret("sentinel_password", r.SentinelPasswordEnv, r.SentinelPasswordFile); err != nil {
			return nil, err
		}
	}
	if r.TLS != nil {
		tc, err := upstream.TLSConfig(r.TLS, false)
		if err != nil {
			return nil, err
		}
		opts.TLSConfig = tc
	}
	return opts, nil
}

// secret reads the password of field (password, sentinel_password) from
// the environment variable env or the file, whichever is set; none is "".
func secret(field, env, file string) (string, error) {
	switch {
	case env != "":
		v, ok := os.LookupEnv(env)
		if !ok {
			return "", fmt.Errorf("%s_env: environment variable %s is not set", field, env)
		}
		return v, nil
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s_file: %w", field, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", nil
}

// close closes the store unless other (the next or previous generation's)
// shares it.
func (ss *sharedStore) closeUnless(other *sharedStore) {
	if ss != nil && ss != other {
		ss.store.Close()
	}
}

// shareSessions puts the shared store behind a listener's (or site's)
// local session cache when it opts in; otherwise the local cache serves
// alone.
func (g *generation) shareSessions(local tlcp.SessionCache, lifetime time.Duration, shared bool) tlcp.SessionCache {
	if !shared || g.shared == nil {
		return local
	}
	return g.shared.store.Cache(local, lifetime)
}

// shareTickets gives a TLS configuration the session ticket keys that
// every replica derives from the same sealing keys for the listener (or
// site) name, so that a ticket from one replica resumes on another. The
// first sealing key encrypts new tickets; the others still decrypt.
func (g *generation) shareTickets(tc *tls.Config, name string, shared bool) {
	if shared && g.shared != nil {
		tc.SetSessionTicketKeys(g.shared.store.TicketKeys(name))
	}
}

// acmeStorage returns the shared certmagic storage, under the store's
// key prefix.
func (ss *sharedStore) acmeStorage() *acme.RedisStorage {
	return acme.NewRedisStorage(ss.store.Client(), ss.spec.Redis.KeyPrefix+"acme:", ss.keys)
}
