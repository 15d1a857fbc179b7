// Package dlp finds secrets and personal data in what a sandbox sends out, so the egress proxy
// can block a request, send it on with the matches redacted, or log it.
//
// # Use
//
// Build one Scanner per policy with New(Config) (loading gitleaks' rules takes ~100 ms the first
// time) and share it; it is safe for concurrent use. For each outgoing request the proxy calls
//
//	v, err := scanner.ScanRequest(r)
//
// and then: on ActionBlock, answers 403 with v.Reason, which is written for the agent to read
// ("blocked: a payment card number (Visa) in the JSON body field $.payment.card", "blocked: an
// AWS access key, base64 → hex, in the query parameter q"); on ActionRedact, forwards r, which
// ScanRequest has already rewritten; on ActionLog and ActionAllow, forwards r unchanged.
// v.Findings (never holding the matched text) and v.Unscanned go to the log either way. err is
// non-nil only when the client's body could not be read. Other callers (MCP tool calls) use
// ScanContent for a body of a known Content-Type or ScanBytes for plain text. For the gateway
// around the request: ScanHost scans a host name before it is resolved, RedactText takes every
// finding out of a text that is kept (an audit record), Entropy and HostLabels serve checks of
// tokens with no known shape. MeasureThroughput is the figure behind `agentbox bench egress`.
//
// # What is scanned
//
// The URL path (percent-decoded), host and user info, every query parameter and header (as
// "name=value" and "Name: value", decoded, so rules that need the name see it), and the body,
// after undoing its Content-Encoding (gzip, deflate; a chain of them), by Content-Type: JSON as
// one text with string escapes decoded (a \u0041 cannot hide an AKIA, a card sent as a JSON
// number is found, and findings carry a JSON path), x-www-form-urlencoded field by field,
// multipart/form-data part by part with file names, and anything else (text/*, unknown, binary)
// as raw bytes.
//
// Then what an agent encodes on purpose is undone too (decode.go). Every scanned text goes
// through a token pass that finds the substrings shaped like an encoding: base64 (standard or
// URL-safe, padded or not, wrapped in lines of 60, 64, 72 or 76), hex (plain, "0x", or bytes
// separated by ':', ' ', '-', or written "\xHH"), percent-escapes, quoted-printable escapes. A
// candidate must pass length and alphabet thresholds (base64: 16 characters or more with both
// cases, so words and one-case identifiers are not decoded; hex: 16 digits or more), and a
// token with '/' (a path) is also tried piece by piece. What decodes to text (valid UTF-8, few
// control bytes) is scanned again with every detector; what decodes to gzip or zlib data is
// inflated first; what decodes to anything else (a UUID, a SHA-256, a PNG) costs the decode
// and nothing more. Chains are followed layer by layer: percent-encoding applied three times
// and then base64 is four layers. A finding in decoded data is placed at the encoded token
// (Finding.Encoding names the chain, outermost first; the reason too), and redacting it
// replaces the whole token (for percent-encoding and quoted-printable, which decode byte by
// byte, the escapes that spell the match).
//
// Decoding is bounded per request by Config.Decode: MaxDepth layers in a chain (4 by default),
// and MaxBytes (32 MiB by default) of decoded text, over all texts and layers, to be scanned
// again. Base64, hex and the escapes only shrink what they decode and only text goes on to the
// next layer, so compressed data and long chains of text are what reach it; a request that does
// is treated like an oversize body. Decoding that gives no text (UUIDs, hashes, a base64 image)
// is counted apart against the same figure: past it the pieces of paths are no longer tried,
// and the request is not cut. Off turns decoding off.
//
// A body larger than MaxBodyBytes (16 MiB by default, on the wire and decoded), or with a
// Content-Encoding it does not decode (br, zstd), or corrupt, falls under Config.Oversize:
// block (the default), allow-unscanned, or scan-prefix (the first MaxBodyBytes, as text; a
// redact finding there blocks, since a body not read whole cannot be rewritten). The body is
// never held beyond MaxBodyBytes: the rest streams on unread.
//
// # Detectors
//
// Each detector and each secret rule has an action; a request's verdict is the strongest action
// among its findings. DefaultActions, and what each detector checks (rules in their files):
//
//	detector            default  checks
//	payment-card        block    13-19 digits, bare or in printed groups, Luhn, brand IIN and length (card.go)
//	secret              block    the egress rules and gitleaks' rules below (egressrules.go, secrets.go)
//	private-key         block    PEM, OpenSSH and PGP private key blocks (privatekey.go)
//	jwt                 block    JWS/JWE whose header decodes to JSON with "alg" (jwt.go)
//	us-ssn              block    AAA-GG-SSSS under the SSA's rules; 9 bare digits next to "SSN" (ssn.go)
//	crypto-private-key  block    Bitcoin WIF keys: base58check, 0x80, 32 bytes (+0x01) (crypto.go)
//	seed-phrase         block    BIP-39 phrases of 12-24 English wordlist words, checksum verified (crypto.go)
//	iban                redact   registry length per country and mod 97 (iban.go)
//	email               log      dot-atom addresses under an ICANN public suffix (email.go)
//	phone               log      libphonenumber-valid, grouped as formatted (phone.go)
//	crypto-address      log      Bitcoin P2PKH/P2SH (base58check), bech32/bech32m (checksum), Ethereum
//	                             (EIP-55 if mixed case, else a context word) (crypto.go)
//	custom              policy   regexes from policy, optionally keyword-gated (config.go)
//
// Cryptocurrency addresses are logged rather than blocked: an address is public and gives no one
// its funds, and payment pages, block explorers and wallets send them; a policy that treats them
// as data to keep in sets crypto-address to block. Keys and seed phrases are the funds.
//
// The secret detector's rules (a single rule's action is set with "secret:<id>"):
//
//	rule id                   finds
//	aws-access-token          AKIA/ASIA/ABIA/ACCA/A3T + 16 of [A-Z0-9]
//	aws-secret-access-key     40 base64 characters after aws_secret_access_key, SecretAccessKey, ...,
//	                          or within 100 bytes of an access key id
//	gcp-api-key               AIza + 35 (Google Cloud and Google AI keys)
//	gcp-service-account-key   the private_key_id of a key file (its private key is a private-key finding)
//	gcp-oauth-client-secret   GOCSPX- + 24-40
//	google-oauth-token        ya29. access tokens, 1//0 refresh tokens
//	azure-storage-key         AccountKey= or azure...key= and 88 base64 characters
//	azure-shared-access-key   SharedAccessKey= (Service Bus, Event Hubs)
//	github-pat, -oauth, -app-token, -refresh-token
//	                          ghp_, gho_, ghu_/ghs_, ghr_ + 20-251 alphanumerics (GitHub issues 36 today)
//	github-fine-grained-pat   github_pat_ + 22-244
//	gitlab-pat, gitlab-token  glpat-, and gldt- glrt- glptt- glcbt- gloas- glsoat- glft- glimt- glagent-
//	                          glffct- glwt- GR1348941, routable forms included
//	bitbucket-app-password    ATBB + 24-120
//	atlassian-token           ATATT3 / ATCTT3 + 24-300
//	openai-api-key            sk-proj-/sk-svcacct-/sk-admin-/sk-None- + 20-300, sk- + 32-64
//	anthropic-api-key         sk-ant-<kind><nn>- + 32-300 (api, admin, oat, ort)
//	huggingface-access-token  hf_ / api_org_ + 30-64, both cases
//	groq-api-key, xai-api-key, perplexity-api-key, openrouter-api-key, replicate-api-token
//	                          gsk_, xai-, pplx-, sk-or-v1-, r8_ keys
//	mistral-api-key, cohere-api-token
//	                          32 / 40 alphanumerics assigned to a mistral / cohere name
//	stripe-access-token       sk_/rk_ live/test/prod + 20-247
//	stripe-webhook-secret     whsec_ + 24-100
//	slack-token               xox[abposre]- and xapp- tokens
//	slack-webhook-url         hooks.slack.com/services|workflows|triggers/...
//	discord-webhook-url       discord(app).com/api/webhooks/<id>/<token>
//	telegram-bot-token        <8-10 digits>:AA + 33
//	database-url-password     the password of postgres(ql), mysql, mariadb, mongodb(+srv), redis(s),
//	                          valkey, amqp(s), mssql, sqlserver, clickhouse, cockroachdb, couchdb,
//	                          neo4j, cassandra URLs (not a $VAR, ${VAR}, {{ }}, <...> or mask)
//	(the rest)                177 of gitleaks v8.30.1's default rules: 'a secret (gitleaks rule <id>)'
//
// These rules are written for egress, not for a repository: a documentation or example key (AWS's
// AKIAIOSFODNN7EXAMPLE, the Google and Stripe keys of public docs, a value that says "example")
// is reported like a real one, with "(an example key)" in the reason; lengths are those the
// issuers allow rather than those they issue today; a token ends at any character outside its
// alphabet, so a key followed by '&' or '/' in a URL is found (gitleaks' own rules get the same
// end, but generic-api-key and vault-service-token). gitleaks' generic-api-key keeps the filters
// that say a name is not a credential's (public_key, key_id) or a value is words: dictionary
// words covering half of it, or the shape of a code identifier (x509.KeyUsageDigitalSignature),
// unless the name says password.
//
// Forms that are common in ordinary data (nine bare digits, a phone number without separators,
// a 0x address in one case) match only with a context word nearby: a DLP that blocks order
// numbers gets switched off.
//
// # Redaction
//
// A redacted match is replaced by [REDACTED:<name>] (the rule id for secrets and custom
// detectors, the detector name otherwise), in the decoded text, then re-encoded for where it
// came from: escaped into its JSON string (a JSON number becomes a string), percent-encoded into
// its form field, query parameter or path, written back into its multipart part, and the body
// compressed again with its Content-Encoding, with ContentLength and Content-Length set. A token
// rather than a same-length mask: it tells the origin and the agent what was removed and cannot
// be taken for data. Matches in the host, the user info or a header name cannot be rewritten;
// a redact action there blocks.
//
// # Speed
//
// The target is over 200 MB/s on a 10 MB JSON body on a 2-core machine, decoding on. Running
// gitleaks' detector on such a body gave 0.1 MB/s, and running its generic-api-key regex alone
// over the body takes ~4 s, so nothing here runs a regex over a whole body. Instead a text gets
// three passes, run as two (concurrently when it is 1 MiB or more and Config.Concurrency
// allows):
//
//   - one Aho-Corasick automaton over the keywords of all rules, plus "eyJ" and "-----BEGIN ",
//     run as four interleaved chains so one core does four table walks at once; each rule's
//     regex then runs only in a window around its keyword hits, sized from the regex's longest
//     match. Rules whose keywords are everyday words (generic-api-key, vault-service-token with
//     "s.", twilio with "sk", openai with "sk-") or look like hex ("a3-", "4b1d", "eaaa") first
//     pass a hand-written necessary condition (TestGates checks them against the regexes).
//   - one scan for digits (eight bytes at a time) that groups digit runs with their separators
//     into clusters, rejects the ones glued to identifiers, and hands the rest to the card, SSN
//     and phone checks; IBAN checks start where a digit run follows two capitals; e-mail checks
//     start at each '@' (found with bytes.IndexByte).
//   - the token pass (decode.go): 64-byte chunks classified eight bytes at a time into bit masks
//     (token bytes, lower-case letters, word separators), whose transitions single out the only
//     tokens that need a look (14 bytes or more, two hex digits, a wrapped line) and the
//     stretches of twelve words or more that may hold a seed phrase, without visiting the other
//     tokens; escapes are found with bytes.IndexByte. It costs about as much as the automaton,
//     and is split between the two goroutines.
//
// On BenchBody (1 MB, one core, user CPU, a loaded machine): the automaton and its windows ~1.4
// ms, the digit pass ~1.3 ms, the token pass ~2.6 ms (1.6 without seed phrases, whose stretches
// cost ~1 ms of it in prose), decoding its few candidates ~0. A base64 image costs its decode
// (~1 ns per byte) and a UTF-8 check; base64 of text costs a second scan of the decoded text.
//
// JSON bodies without backslashes are scanned in place; the view of one with escapes is a pooled
// buffer. A text built to be slow (a megabyte of "api_key=<random>" lines or of phone numbers)
// hits a work limit (1000 findings, regex window bytes, phone parses; scanner.go) and is treated
// like an oversize body, so no request holds the scanner for more than a fraction of a second.
// Paths are computed only when there are findings, by a walk that stops after the last.
// BenchmarkScanRequestJSON10MB and MeasureThroughput measure the whole of ScanRequest on
// BenchBody, a generated chat-completion body with product records, log lines, prose and a few
// secrets every ~100 KB; docs/RATIONALE.md has the figures.
package dlp
