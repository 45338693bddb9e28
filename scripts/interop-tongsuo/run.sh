#!/usr/bin/env bash
# Interoperability of gmgate's TLS 1.3 ShangMi (RFC 8998) with Tongsuo, in
# both directions; see README.md next to this file. Prints PASS, FAIL or
# SKIP per case and exits 1 when a case failed.
#
#   TONGSUO=/path/to/tongsuo/apps/openssl scripts/interop-tongsuo/run.sh
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [ -z "${TONGSUO:-}" ] || [ ! -x "${TONGSUO:-}" ]; then
	echo "set TONGSUO to a Tongsuo openssl binary built from its public source (see README.md)" >&2
	exit 2
fi
if ! "$TONGSUO" version | grep -q Tongsuo; then
	echo "$TONGSUO is not Tongsuo's openssl ($("$TONGSUO" version | head -1))" >&2
	exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/gmgate-interop.XXXXXX")
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	if [ -n "${KEEP:-}" ]; then
		echo "files kept in $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

if [ -z "${GMGATE:-}" ]; then
	echo "building gmgate from $repo"
	(cd "$repo" && go build -o "$work/gmgate" ./cmd/gmgate) || exit 2
	GMGATE=$work/gmgate
fi

passed=0 failed=0 skipped=0
results=()
result() { # verdict name [detail]
	local line
	line=$(printf '%-4s %s' "$1" "$2")
	[ -n "${3:-}" ] && line="$line: $3"
	results+=("$line")
	echo "$line"
	case $1 in
	PASS) passed=$((passed + 1)) ;;
	FAIL) failed=$((failed + 1)) ;;
	SKIP) skipped=$((skipped + 1)) ;;
	esac
}

# free_port prints a loopback port nobody listens on, below Linux's
# default range of ephemeral ports (32768-60999), where the local end of an
# outgoing connection could hold it without listening.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

# wait_port port [pid]: waits until something accepts connections on the
# port, up to 60 s, and gives up at once when the process pid (the server
# that should listen there) has exited.
wait_port() {
	local i
	for i in $(seq 600); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		if [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null; then
			return 1
		fi
		sleep 0.1
	done
	return 1
}

stop() { # pid
	kill "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# --- identities: a local SM2 CA, a server and a client certificate -------
cd "$work" || exit 2
"$GMGATE" cert init-ca --out ca >/dev/null || exit 2
"$GMGATE" cert issue --ca ca --dns localhost --ip 127.0.0.1 --out server >/dev/null || exit 2
"$GMGATE" cert issue --ca ca --dns client.test --out client >/dev/null || exit 2
CA=$work/ca/ca.crt
SRV_SIGN_CERT=$work/server/localhost.sign.crt SRV_SIGN_KEY=$work/server/localhost.sign.key
SRV_ENC_CERT=$work/server/localhost.enc.crt SRV_ENC_KEY=$work/server/localhost.enc.key
CLI_CERT=$work/client/client.test.sign.crt CLI_KEY=$work/client/client.test.sign.key

short() { # suite -> GCM or CCM
	case $1 in *GCM*) echo GCM ;; *) echo CCM ;; esac
}

# start_s_server suite groups auth: Tongsuo's s_server answering each
# HTTP GET with a status page (-www) that says New or Reused, the suite and
# the client certificate, on a free loopback port that it leaves in $port
# (its pid in $server_pid). It returns once s_server has printed ACCEPT
# (it is bound and accepting), and fails when s_server exits first or has
# not said so within 60 s; s_server_failure then says why. A port that was
# taken between free_port and the bind (s_server exits: the address is in
# use) is tried again with another, three times in all.
start_s_server() {
	local try i log
	for try in 1 2 3; do
		port=$(free_port)
		log=$work/s_server.$port.log
		local args=(s_server -accept "127.0.0.1:$port" -www -tls1_3 -ciphersuites "$1" -sigalgs sm2sig_sm3 -groups "$2"
			-cert "$SRV_SIGN_CERT" -key "$SRV_SIGN_KEY" -CAfile "$CA")
		[ "$3" = mutual ] && args+=(-Verify 1)
		"$TONGSUO" "${args[@]}" >"$log" 2>&1 &
		server_pid=$!
		pids+=($server_pid)
		for i in $(seq 600); do
			grep -q '^ACCEPT' "$log" 2>/dev/null && return 0
			kill -0 "$server_pid" 2>/dev/null || break
			sleep 0.1
		done
		stop "$server_pid"
		s_server_failure="s_server did not listen on 127.0.0.1:$port (try $try): $(tail -1 "$log" 2>/dev/null)"
		grep -qi 'in use' "$log" 2>/dev/null || return 1
	done
	return 1
}

# --- gmgate probe => Tongsuo s_server --------------------------------------
for suite in TLS_SM4_GCM_SM3 TLS_SM4_CCM_SM3; do
	for group in curveSM2 curveSM2MLKEM768; do
		for auth in none mutual; do
			name="probe => s_server $(short $suite) $group auth=$auth, resumed"
			if ! start_s_server "$suite" "$group" "$auth"; then
				result FAIL "$name" "$s_server_failure"
				continue
			fi
			args=(probe --protocol tls13-sm --ca "$CA" --sni localhost --suite "$suite" --group "$group" --resume)
			[ "$auth" = mutual ] && args+=(--cert "$CLI_CERT" --key "$CLI_KEY")
			out=$("$GMGATE" "${args[@]}" "https://127.0.0.1:$port/" 2>&1)
			code=$?
			stop "$server_pid"
			why=""
			[ $code -ne 0 ] && why="probe exit $code"
			grep -q "handshake done in .*: $suite, group $group (resumed: no)" <<<"$out" || why="${why:-first handshake not $suite/$group}"
			grep -q "second connection resumed the session: yes" <<<"$out" || why="${why:-no resumption}"
			grep -q "New, TLSv1.3, Cipher is $suite" <<<"$out" || why="${why:-s_server did not report a new $suite session}"
			grep -q "Reused, TLSv1.3, Cipher is $suite" <<<"$out" || why="${why:-s_server did not report the session reused}"
			if [ "$auth" = mutual ]; then
				grep -q "^Client certificate" <<<"$out" || why="${why:-s_server saw no client certificate}"
			fi
			if [ -z "$why" ]; then result PASS "$name"; else result FAIL "$name" "$why"; echo "$out" >"$work/fail.$port.out"; fi
		done
	done
done

# HelloRetryRequest: the probe's first key share (curveSM2) is not the
# server's group.
name="probe => s_server GCM curveSM2MLKEM768 only, HelloRetryRequest"
if start_s_server TLS_SM4_GCM_SM3 curveSM2MLKEM768 none; then
	out=$("$GMGATE" probe --protocol tls13-sm --ca "$CA" --sni localhost --group curveSM2,curveSM2MLKEM768 "https://127.0.0.1:$port/" 2>&1)
	code=$?
	stop "$server_pid"
	if [ $code -eq 0 ] && grep -q "group curveSM2MLKEM768, after a HelloRetryRequest" <<<"$out"; then
		result PASS "$name"
	else
		result FAIL "$name" "exit $code, no HelloRetryRequest reported"
	fi
else
	result FAIL "$name" "$s_server_failure"
fi

# A server that requires a client certificate refuses a probe without one.
name="probe => s_server GCM curveSM2 auth=mutual, no client certificate refused"
if start_s_server TLS_SM4_GCM_SM3 curveSM2 mutual; then
	out=$("$GMGATE" probe --protocol tls13-sm --ca "$CA" --sni localhost "https://127.0.0.1:$port/" 2>&1)
	code=$?
	stop "$server_pid"
	if [ $code -ne 0 ] && grep -qi "certificate required\|handshake failure" <<<"$out"; then
		result PASS "$name"
	else
		result FAIL "$name" "exit $code: $(tail -1 <<<"$out")"
	fi
else
	result FAIL "$name" "$s_server_failure"
fi

# --- gmgate serve, tls13sm:// upstream => Tongsuo s_server ---------------
# Each s_server -www answer ends its connection, so the second request makes
# a new one, which resumes the first one's ticket.
for combo in "TLS_SM4_GCM_SM3 curveSM2MLKEM768" "TLS_SM4_CCM_SM3 curveSM2" "TLS_SM4_GCM_SM3 curveSM2"; do
	read -r suite group <<<"$combo"
	name="upstream tls13sm:// => s_server $(short $suite) $group auth=mutual, resumed"
	if ! start_s_server "$suite" "$group" mutual; then
		result FAIL "$name" "$s_server_failure"
		continue
	fi
	app=$(free_port)
	admin=$(free_port)
	cat >"$work/upstream.$port.yaml" <<YAML
admin: {listen: "127.0.0.1:$admin"}
log: {access: "off"}
listeners:
  - {name: app, listen: "127.0.0.1:$app", protocol: http, routes: [{upstream: partner}]}
upstreams:
  partner:
    targets: ["tls13sm://127.0.0.1:$port"]
    health: {disabled: true}
    tls13sm:
      ca: $CA
      server_name: localhost
      sign_cert: $CLI_CERT
      sign_key: $CLI_KEY
      suites: [$suite]
      groups: [$group]
YAML
	if ! "$GMGATE" config check -c "$work/upstream.$port.yaml" >"$work/check.$port.out" 2>&1; then
		stop "$server_pid"
		result FAIL "$name" "config check: $(tail -1 "$work/check.$port.out")"
		continue
	fi
	"$GMGATE" serve -c "$work/upstream.$port.yaml" >"$work/serve.$port.log" 2>&1 &
	gw=$!
	pids+=($gw)
	why=""
	if wait_port "$app" "$gw"; then
		first=$(curl -sS --max-time 20 "http://127.0.0.1:$app/first" 2>&1)
		second=$(curl -sS --max-time 20 "http://127.0.0.1:$app/second" 2>&1)
		metrics=$(curl -sS --max-time 10 "http://127.0.0.1:$admin/metrics" 2>&1)
		grep -q "New, TLSv1.3, Cipher is $suite" <<<"$first" || why="first request: s_server did not report a new $suite session"
		grep -q "^Client certificate" <<<"$first" || why="${why:-s_server saw no client certificate}"
		grep -q "Reused, TLSv1.3, Cipher is $suite" <<<"$second" || why="${why:-second request: s_server did not report the session reused}"
		grep -q "gmgate_upstream_handshakes_total{resumed=\"true\",suite=\"$suite\",upstream=\"partner\"} 1" <<<"$metrics" ||
			why="${why:-gmgate_upstream_handshakes_total does not count the resumed handshake}"
	else
		why="gmgate serve did not listen: $(tail -3 "$work/serve.$port.log")"
	fi
	stop "$gw"
	stop "$server_pid"
	if [ -z "$why" ]; then result PASS "$name"; else result FAIL "$name" "$why"; fi
done

# --- Tongsuo s_client => gmgate serve ------------------------------------
# gmgate serve runs serve.yaml.in beside this script (or the file that
# GMGATE_SERVE_TEMPLATE names): an auto listener whose site's TLCP signing
# pair answers TLS 1.3 ShangMi; and serve-tls.yaml.in (or
# GMGATE_SERVE_TLS_TEMPLATE): a tls listener whose site has an SM2
# identity in its tls section (tls.sm2). Their placeholders @LISTEN@,
# @ADMIN@, @SIGN_CERT@, @SIGN_KEY@, @ENC_CERT@, @ENC_KEY@, @CLIENT_CA@ and
# @CLIENT_AUTH@ (none or require_and_verify) are filled in; the route's
# upstream is unreachable (a 502 answer still proves the handshake).
GMGATE_SERVE_TEMPLATE=${GMGATE_SERVE_TEMPLATE:-$here/serve.yaml.in}
GMGATE_SERVE_TLS_TEMPLATE=${GMGATE_SERVE_TLS_TEMPLATE:-$here/serve-tls.yaml.in}
serve_cases=()
for listener in auto tls; do
	for suite in TLS_SM4_GCM_SM3 TLS_SM4_CCM_SM3; do
		for group in curveSM2 curveSM2MLKEM768; do
			for auth in none mutual; do
				serve_cases+=("$listener $suite $group $auth")
			done
		done
	done
done
# s_client sends one request and reports the session.
s_client() { # port suite group auth sess-flag sess-file
	local args=(s_client -connect "127.0.0.1:$1" -tls1_3 -ciphersuites "$2" -sigalgs sm2sig_sm3 -groups "$3"
		-servername localhost -CAfile "$CA" -verify_return_error -ign_eof "$5" "$6")
	[ "$4" = mutual ] && args+=(-cert "$CLI_CERT" -key "$CLI_KEY")
	printf 'GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' | timeout 20 "$TONGSUO" "${args[@]}" 2>&1
}
for c in "${serve_cases[@]}"; do
	read -r listener suite group auth <<<"$c"
	template=$GMGATE_SERVE_TEMPLATE
	name="s_client => gmgate serve $(short $suite) $group auth=$auth, resumed (-sess_out/-sess_in)"
	if [ "$listener" = tls ]; then
		template=$GMGATE_SERVE_TLS_TEMPLATE
		name="s_client => gmgate serve tls listener, tls.sm2, $(short $suite) $group auth=$auth, resumed (-sess_out/-sess_in)"
	fi
	listen=$(free_port)
	admin=$(free_port)
	client_auth=none
	[ "$auth" = mutual ] && client_auth=require_and_verify
	sed -e "s|@LISTEN@|127.0.0.1:$listen|g" -e "s|@ADMIN@|127.0.0.1:$admin|g" \
		-e "s|@SIGN_CERT@|$SRV_SIGN_CERT|g" -e "s|@SIGN_KEY@|$SRV_SIGN_KEY|g" \
		-e "s|@ENC_CERT@|$SRV_ENC_CERT|g" -e "s|@ENC_KEY@|$SRV_ENC_KEY|g" \
		-e "s|@CLIENT_CA@|$CA|g" -e "s|@CLIENT_AUTH@|$client_auth|g" \
		"$template" >"$work/serve.$listen.yaml"
	"$GMGATE" serve -c "$work/serve.$listen.yaml" >"$work/serve.$listen.log" 2>&1 &
	gw=$!
	pids+=($gw)
	why=""
	if wait_port "$listen" "$gw"; then
		sess=$work/sess.$listen.pem
		first=$(s_client "$listen" "$suite" "$group" "$auth" -sess_out "$sess")
		second=$(s_client "$listen" "$suite" "$group" "$auth" -sess_in "$sess")
		grep -q "^New, TLSv1.3, Cipher is $suite" <<<"$first" || why="first connection: not a new $suite session"
		# s_client names the hybrid group; for curveSM2 alone it prints
		# the peer's temporary key instead.
		if [ "$group" = curveSM2 ]; then
			grep -q "Peer Temp Key: ECDH, SM2, 256 bits" <<<"$first" || why="${why:-first connection: no curveSM2 key exchange reported}"
		else
			grep -q "Negotiated TLS1.3 group: $group" <<<"$first" || why="${why:-first connection: group $group not reported}"
		fi
		# The answer may land inside s_client's dump of the ticket that
		# came just before it, so the status line is looked for anywhere.
		grep -q "HTTP/1\.[01] [1-5][0-9][0-9] " <<<"$first" || why="${why:-no HTTP answer}"
		grep -q "^Reused, TLSv1.3, Cipher is $suite" <<<"$second" || why="${why:-second connection did not resume}"
	else
		why="gmgate serve did not listen: $(tail -3 "$work/serve.$listen.log")"
	fi
	stop "$gw"
	if [ -z "$why" ]; then result PASS "$name"; else result FAIL "$name" "$why"; fi
done

# --- the tlcp/tls13 package against Tongsuo, both directions ---------------
# Its tests run Tongsuo's s_server and s_client against the package's
# client and server (the same code gmgate serve and the upstreams use).
if [ -n "${SKIP_GO_TESTS:-}" ]; then
	result SKIP "go test ./tlcp/tls13 -run TestTongsuo" "SKIP_GO_TESTS is set"
elif ! command -v go >/dev/null; then
	result SKIP "go test ./tlcp/tls13 -run TestTongsuo" "no go toolchain"
else
	out=$(cd "$repo" && GMGATE_TONGSUO="$TONGSUO" go test -count=1 -run TestTongsuo -v ./tlcp/tls13 2>&1)
	found=0
	while read -r verdict test; do
		found=1
		result "$verdict" "tls13 package: $test"
	done < <(sed -n 's/^ *--- \(PASS\|FAIL\|SKIP\): \([^ ]*\).*/\1 \2/p' <<<"$out")
	if [ $found -eq 0 ]; then
		result FAIL "go test ./tlcp/tls13 -run TestTongsuo" "$(tail -3 <<<"$out")"
	fi
fi

echo
echo "$passed passed, $failed failed, $skipped skipped (Tongsuo: $("$TONGSUO" version | head -1))"
[ $failed -eq 0 ]
