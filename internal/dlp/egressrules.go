package dlp

import (
	"bytes"
	"regexp"
	"strings"
)

// Egress rules: credential shapes written for an egress firewall rather than a code scanner.
// gitleaks' rules are made for repositories: they skip documentation keys (AKIA...EXAMPLE),
// require the exact lengths issued today (a GitHub token four characters short passes) and end a
// token only at a quote, a blank or ';' (so a key followed by '&' or '/' in a URL passes). On
// egress a value shaped like a credential leaving the sandbox is the event, so these rules:
//
//   - accept the lengths and alphabets the issuers document or allow for (GitHub tokens from 20
//     to 255 characters, Stripe keys up to 247, OpenAI's sk-proj- keys with or without the
//     T3BlbkFJ marker), and end a token at any character outside its alphabet;
//   - report documentation and example keys like real ones, with "(an example key)" in the
//     reason: the allowlists of the gitleaks rules they replace mark a match as an example
//     instead of dropping it;
//   - cover the providers agents use most: cloud keys (AWS, Google Cloud, Azure), Git hosting
//     tokens (GitHub, GitLab, Bitbucket/Atlassian), model providers (OpenAI, Anthropic, Google
//     AI, Hugging Face, Groq, Mistral, Cohere, xAI, Perplexity, OpenRouter, Replicate), payment
//     keys (Stripe), chat webhooks and tokens (Slack, Discord, Telegram) and database URLs with
//     a password.
//
// Each rule has the id of the gitleaks rule it supersedes where there is one (so policies that
// name "secret:github-pat" keep working) and lists the gitleaks rules it replaces, which are
// then not loaded. They run like gitleaks' rules: keyword automaton, windows, gates.

type egressRule struct {
	id, desc string
	pattern  string // RE2; the secret is the group named "secret", else the whole match
	keywords []string
	// replaces lists the gitleaks rules this one supersedes; their allowlists mark examples.
	replaces []string
	entropy  float64                            // minimum Shannon entropy of the secret
	check    func(secret []byte) bool           // further condition on the secret, if any
	gate     func([]byte, int, int) (bool, int) // see secretGates
	examples []string                           // documented example values, reported as examples
	// exampleNoun replaces "key" in "(an example key)".
	exampleNoun string
}

// tokenEnd ends a token at any character outside [A-Za-z0-9_-], or at the end of the text.
const tokenEnd = `(?:[^A-Za-z0-9_-]|$)`

// tokenStart is the same before a token (it consumes the character; the secret group does not
// include it).
const tokenStart = `(?:^|[^A-Za-z0-9_-])`

var egressRules = []egressRule{
	// Cloud.
	{
		id: "aws-access-token", desc: "an AWS access key",
		pattern:  `(?:^|[^A-Za-z0-9])(?P<secret>(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16})(?:[^A-Za-z0-9]|$)`,
		keywords: []string{"akia", "asia", "abia", "acca", "a3t"},
		replaces: []string{"aws-access-token"}, entropy: 2.5,
	},
	{
		id: "aws-secret-access-key", desc: "an AWS secret access key",
		pattern: `(?i)(?:aws[_.-]?secret(?:[_.-]?access)?[_.-]?key|secret[_.-]?access[_.-]?key)(?:[_.-]?id)?\\?["']?[ \t]*(?:=>|:=|[:=])[ \t]*\\?["']?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)`,
		keywords: []string{"secret_access_key", "secret-access-key", "secret.access.key", "secretaccesskey",
			"aws_secret", "aws-secret", "aws.secret", "awssecret"},
		entropy: 3.5, check: awsSecretShape, examples: []string{"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
	},
	{
		// An access key id and, within 100 bytes of it, 40 characters of base64: the pair an
		// agent copies out of a credentials file, a CSV download or "id:secret".
		id: "aws-secret-access-key", desc: "an AWS secret access key (next to its key id)",
		pattern: `(?:AKIA|ASIA)[A-Z0-9]{16}[^A-Za-z0-9/+]{1,100}?(?P<secret>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)` +
			`|(?:^|[^A-Za-z0-9/+])(?P<secret2>[A-Za-z0-9/+]{40})[^A-Za-z0-9/+]{1,100}?(?:AKIA|ASIA)[A-Z0-9]{16}(?:[^A-Za-z0-9]|$)`,
		keywords: []string{"akia", "asia"},
		entropy:  3.5, check: awsSecretShape, examples: []string{"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"},
	},
	{
		id: "gcp-api-key", desc: "a Google API key (Google Cloud or Google AI)",
		pattern:  tokenStart + `(?P<secret>AIza[0-9A-Za-z_-]{35})` + tokenEnd,
		keywords: []string{"aiza"}, replaces: []string{"gcp-api-key"}, entropy: 3,
	},
	{
		id: "gcp-service-account-key", desc: "a Google Cloud service-account key file",
		pattern:  `\\?"private_key_id\\?"[ \t]*:[ \t]*\\?"(?P<secret>[a-f0-9]{40})\\?"`,
		keywords: []string{"private_key_id"},
	},
	{
		id: "gcp-oauth-client-secret", desc: "a Google OAuth client secret",
		pattern:  tokenStart + `(?P<secret>GOCSPX-[A-Za-z0-9_-]{24,40})` + tokenEnd,
		keywords: []string{"gocspx-"}, entropy: 3,
	},
	{
		id: "google-oauth-token", desc: "a Google OAuth token",
		pattern:  `(?:^|[^A-Za-z0-9_.-])(?P<secret>ya29\.[A-Za-z0-9_-]{30,1000}|1//0[A-Za-z0-9_-]{40,512})` + tokenEnd,
		keywords: []string{"ya29.", "1//0"}, entropy: 3,
	},
	{
		id: "azure-storage-key", desc: "an Azure storage account key",
		pattern: `(?i)(?:AccountKey[ \t]*=[ \t]*|azure[\w.-]{0,30}(?:key|secret)\\?["']?[ \t]*(?:=>|:=|[:=])[ \t]*\\?["']?)` +
			`(?P<secret>[A-Za-z0-9+/]{86}==)`,
		keywords: []string{"accountkey", "azure"}, entropy: 4,
	},
	{
		id: "azure-shared-access-key", desc: "an Azure Service Bus or Event Hubs shared access key",
		pattern:  `(?i)SharedAccessKey[ \t]*=[ \t]*(?P<secret>[A-Za-z0-9+/]{42,44}={0,2})(?:[^A-Za-z0-9+/=]|$)`,
		keywords: []string{"sharedaccesskey"}, entropy: 4,
	},

	// Git hosting.
	{
		id: "github-pat", desc: "a GitHub personal access token",
		pattern:  `(?P<secret>ghp_[A-Za-z0-9]{20,251})` + tokenEnd,
		keywords: []string{"ghp_"}, replaces: []string{"github-pat"}, entropy: 3,
	},
	{
		id: "github-oauth", desc: "a GitHub OAuth token",
		pattern:  `(?P<secret>gho_[A-Za-z0-9]{20,251})` + tokenEnd,
		keywords: []string{"gho_"}, replaces: []string{"github-oauth"}, entropy: 3,
	},
	{
		id: "github-app-token", desc: "a GitHub app token",
		pattern:  `(?P<secret>gh[us]_[A-Za-z0-9]{20,251})` + tokenEnd,
		keywords: []string{"ghu_", "ghs_"}, replaces: []string{"github-app-token"}, entropy: 3,
	},
	{
		id: "github-refresh-token", desc: "a GitHub refresh token",
		pattern:  `(?P<secret>ghr_[A-Za-z0-9]{20,251})` + tokenEnd,
		keywords: []string{"ghr_"}, replaces: []string{"github-refresh-token"}, entropy: 3,
	},
	{
		id: "github-fine-grained-pat", desc: "a GitHub fine-grained personal access token",
		pattern:  `(?P<secret>github_pat_[A-Za-z0-9_]{22,244})` + tokenEnd,
		keywords: []string{"github_pat_"}, replaces: []string{"github-fine-grained-pat"}, entropy: 3,
	},
	{
		id: "gitlab-pat", desc: "a GitLab personal access token",
		pattern:  `(?P<secret>glpat-[A-Za-z0-9_-]{20,300}(?:\.[A-Za-z0-9_-]{2,64}){0,2})` + tokenEnd,
		keywords: []string{"glpat-"}, replaces: []string{"gitlab-pat", "gitlab-pat-routable"}, entropy: 3,
	},
	{
		id: "gitlab-token", desc: "a GitLab token",
		pattern: `(?P<secret>(?:gldt|glrt|glptt|glcbt|gloas|glsoat|glft|glimt|glagent|glffct|glwt)-[A-Za-z0-9_-]{20,300}(?:\.[A-Za-z0-9_-]{2,64}){0,2}` +
			`|GR1348941[A-Za-z0-9_-]{20,100})` + tokenEnd,
		keywords: []string{"gldt-", "glrt-", "glptt-", "glcbt-", "gloas-", "glsoat-", "glft-", "glimt-", "glagent-", "glffct-", "glwt-", "gr1348941"},
		replaces: []string{"gitlab-deploy-token", "gitlab-feature-flag-client-token", "gitlab-feed-token",
			"gitlab-incoming-mail-token", "gitlab-kubernetes-agent-token", "gitlab-oauth-app-secret", "gitlab-ptt",
			"gitlab-rrt", "gitlab-runner-authentication-token", "gitlab-runner-authentication-token-routable",
			"gitlab-scim-token", "gitlab-cicd-job-token"},
		entropy: 3,
	},
	{
		id: "bitbucket-app-password", desc: "a Bitbucket app password",
		pattern:  tokenStart + `(?P<secret>ATBB[A-Za-z0-9_=.-]{24,120})` + tokenEnd,
		keywords: []string{"atbb"}, entropy: 3,
	},
	{
		id: "atlassian-token", desc: "an Atlassian or Bitbucket access token",
		pattern:  tokenStart + `(?P<secret>AT[AC]TT3[A-Za-z0-9_=-]{24,300})` + tokenEnd,
		keywords: []string{"atatt3", "atctt3"}, entropy: 3,
	},

	// Model providers.
	{
		id: "openai-api-key", desc: "an OpenAI API key",
		pattern:  tokenStart + `(?P<secret>sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,300}|sk-[A-Za-z0-9]{32,64})` + tokenEnd,
		keywords: []string{"sk-"}, replaces: []string{"openai-api-key"}, entropy: 3,
		gate: prefixGate("sk-"),
	},
	{
		id: "anthropic-api-key", desc: "an Anthropic API key",
		pattern:  `(?P<secret>sk-ant-[a-z]{2,10}[0-9]{0,3}-[A-Za-z0-9_-]{32,300})` + tokenEnd,
		keywords: []string{"sk-ant-"}, replaces: []string{"anthropic-api-key", "anthropic-admin-api-key"}, entropy: 3,
	},
	{
		id: "huggingface-access-token", desc: "a Hugging Face token",
		pattern:  `(?:^|[^A-Za-z0-9_])(?P<secret>hf_[A-Za-z0-9]{30,64}|api_org_[A-Za-z0-9]{30,64})` + tokenEnd,
		keywords: []string{"hf_", "api_org_"}, replaces: []string{"huggingface-access-token", "huggingface-organization-api-token"},
		entropy: 3, check: mixedCase, gate: prefixGate("hf_", "api_org_"),
	},
	{
		id: "groq-api-key", desc: "a Groq API key",
		pattern:  tokenStart + `(?P<secret>gsk_[A-Za-z0-9]{40,64})` + tokenEnd,
		keywords: []string{"gsk_"}, entropy: 3,
	},
	{
		id: "mistral-api-key", desc: "a Mistral API key",
		pattern:  `(?i)mistral[\w.-]{0,30}\\?["']?[ \t]*(?:=>|:=|[:=(])[ \t]*(?:api_key[ \t]*=[ \t]*)?\\?["']?(?P<secret>[A-Za-z0-9]{32})(?:[^A-Za-z0-9]|$)`,
		keywords: []string{"mistral"}, entropy: 3.5, check: lettersAndDigits,
	},
	{
		id: "cohere-api-token", desc: "a Cohere API key",
		pattern:  `(?i)(?:cohere|co_api_key)[\w.-]{0,30}\\?["']?[ \t]*(?:=>|:=|[:=(])[ \t]*(?:api_key[ \t]*=[ \t]*)?\\?["']?(?P<secret>[A-Za-z0-9]{40})(?:[^A-Za-z0-9]|$)`,
		keywords: []string{"cohere", "co_api_key"}, replaces: []string{"cohere-api-token"}, entropy: 3.5, check: lettersAndDigits,
	},
	{
		id: "xai-api-key", desc: "an xAI API key",
		pattern:  tokenStart + `(?P<secret>xai-[A-Za-z0-9]{60,100})` + tokenEnd,
		keywords: []string{"xai-"}, entropy: 3,
	},
	{
		id: "perplexity-api-key", desc: "a Perplexity API key",
		pattern:  tokenStart + `(?P<secret>pplx-[A-Za-z0-9]{40,64})` + tokenEnd,
		keywords: []string{"pplx-"}, replaces: []string{"perplexity-api-key"}, entropy: 3,
	},
	{
		id: "openrouter-api-key", desc: "an OpenRouter API key",
		pattern:  tokenStart + `(?P<secret>sk-or-v[0-9]-[A-Za-z0-9]{40,80})` + tokenEnd,
		keywords: []string{"sk-or-v"}, entropy: 3,
	},
	{
		id: "replicate-api-token", desc: "a Replicate API token",
		pattern:  `(?:^|[^A-Za-z0-9_])(?P<secret>r8_[A-Za-z0-9]{30,50})` + tokenEnd,
		keywords: []string{"r8_"}, entropy: 3, check: lettersAndDigits, gate: prefixGate("r8_"),
	},

	// Payments.
	{
		id: "stripe-access-token", desc: "a Stripe secret key",
		pattern:  `(?P<secret>(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{20,247})` + tokenEnd,
		keywords: []string{"sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_"},
		replaces: []string{"stripe-access-token"}, entropy: 3,
		examples: []string{"sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_BQokikJOvBiI2HlWgH4olfQ2"},
	},
	{
		id: "stripe-webhook-secret", desc: "a Stripe webhook signing secret",
		pattern:  `(?P<secret>whsec_[A-Za-z0-9+/=]{24,100})(?:[^A-Za-z0-9+/=_-]|$)`,
		keywords: []string{"whsec_"}, entropy: 3,
	},

	// Chat.
	{
		id: "slack-token", desc: "a Slack token",
		pattern:  `(?P<secret>xox[abposre]-[A-Za-z0-9-]{10,250}|xapp-[0-9]-[A-Za-z0-9-]{10,250})` + `(?:[^A-Za-z0-9-]|$)`,
		keywords: []string{"xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "xoxe-", "xapp-"},
		replaces: []string{"slack-bot-token", "slack-user-token", "slack-app-token", "slack-config-access-token",
			"slack-config-refresh-token", "slack-legacy-bot-token", "slack-legacy-token", "slack-legacy-workspace-token"},
		entropy: 3, check: hasDigitRun,
	},
	{
		id: "slack-webhook-url", desc: "a Slack webhook URL",
		pattern:  `(?P<secret>(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/_-]{20,200})`,
		keywords: []string{"hooks.slack.com"}, replaces: []string{"slack-webhook-url"},
	},
	{
		id: "discord-webhook-url", desc: "a Discord webhook URL",
		pattern:  `(?i)(?P<secret>(?:https?://)?(?:ptb\.|canary\.)?discord(?:app)?\.com/api/(?:v[0-9]+/)?webhooks/[0-9]{15,25}/[A-Za-z0-9_-]{50,100})`,
		keywords: []string{"discord.com/api", "discordapp.com/api"},
	},
	{
		id: "telegram-bot-token", desc: "a Telegram bot token",
		pattern:  `(?:^|[^0-9])(?P<secret>[0-9]{8,10}:AA[A-Za-z0-9_-]{33})` + tokenEnd,
		keywords: []string{":aa"}, gate: telegramGate,
	},

	// Database URLs with a password.
	{
		id: "database-url-password", desc: "a database URL with a password",
		pattern: `(?i)(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|valkey|amqps?|mssql|sqlserver|clickhouse|cockroachdb|couchdb|neo4j(?:\+s)?|cassandra)` +
			`(?:\+[a-z0-9]+)?://[^:/?#@\s"'<>]{0,128}:(?P<secret>[^@/?#\s"'<>]{1,256})@`,
		keywords: []string{"postgres", "mysql", "mariadb", "mongodb", "redis", "valkey", "amqp", "mssql", "sqlserver",
			"clickhouse", "cockroachdb", "couchdb", "neo4j", "cassandra"},
		check: notReference, exampleNoun: "password",
		examples: []string{"password", "pass", "passwd", "secret", "changeme", "example", "test", "pwd", "postgres", "root", "admin"},
	},
}

// prefixGate: the keyword hit must be one of the literals, in that case, not preceded by a
// letter, digit, '_' or '-' (the rule's regex starts with tokenStart or an equivalent).
func prefixGate(literals ...string) func(text []byte, kwStart, kwEnd int) (bool, int) {
	return func(text []byte, kwStart, kwEnd int) (bool, int) {
		if kwStart > 0 && (isWord(text[kwStart-1]) || text[kwStart-1] == '-') {
			return false, 0
		}
		for _, l := range literals {
			if string(text[kwStart:kwEnd]) == l {
				return true, 0
			}
		}
		return false, 0
	}
}

// telegramGate: ":AA" in that case, after at least eight digits.
func telegramGate(text []byte, kwStart, kwEnd int) (bool, int) {
	if text[kwStart+1] != 'A' || text[kwStart+2] != 'A' || kwStart < 8 {
		return false, 0
	}
	for _, c := range text[kwStart-8 : kwStart] {
		if !isDigit(c) {
			return false, 0
		}
	}
	return true, 0
}

// awsSecretShape: 40 characters of base64 with both cases (a SHA-1 in hex has one).
func awsSecretShape(b []byte) bool { return mixedCase(b) }

func mixedCase(b []byte) bool {
	var up, lo bool
	for _, c := range b {
		up = up || ('A' <= c && c <= 'Z')
		lo = lo || ('a' <= c && c <= 'z')
	}
	return up && lo
}

func lettersAndDigits(b []byte) bool {
	var l, d bool
	for _, c := range b {
		d = d || isDigit(c)
		l = l || byteClass[c]&(clsUpper|clsLower) != 0
	}
	return l && d
}

// hasDigitRun: Slack tokens carry numeric ids (xoxb-<team>-<bot>-...); prose with "xoxo-" does not.
func hasDigitRun(b []byte) bool {
	run := 0
	for _, c := range b {
		if isDigit(c) {
			if run++; run >= 4 {
				return true
			}
		} else {
			run = 0
		}
	}
	return false
}

// referenceRE matches values that stand for a secret without being one: variable references
// and templates ($DB_PASSWORD, ${PASS}, {{ .Password }}, %PASSWORD%, <password>), and masks.
var referenceRE = regexp.MustCompile(`^(?:\$[A-Za-z_][A-Za-z0-9_]*|\$\{[^}]*\}|\$\([^)]*\)|\{\{[^}]*\}\}|%[A-Za-z_][A-Za-z0-9_]*%|<[^>]*>|\*+|x+|X+|\.+|_+)$`)

func notReference(b []byte) bool { return !referenceRE.Match(b) }

// isExampleValue reports whether a secret is an example: one of the rule's documented examples,
// or a value that says so ("EXAMPLE", "example", "sample", "dummy", "placeholder"). Such
// values are reported like real ones; the reason says "an example key".
func isExampleValue(secret []byte, examples []string) bool {
	for _, e := range examples {
		if string(secret) == e {
			return true
		}
	}
	l := bytes.ToLower(secret)
	for _, w := range []string{"example", "sample", "dummy", "placeholder"} {
		if bytes.Contains(l, []byte(w)) {
			return true
		}
	}
	return false
}

// egressRuleIDs are the ids of the egress rules, for config validation.
func egressRuleIDs() map[string]bool {
	ids := map[string]bool{}
	for _, r := range egressRules {
		ids[r.id] = true
	}
	return ids
}

// replacedByEgress is the set of gitleaks rules an egress rule supersedes, with the egress rule.
func replacedByEgress() map[string]string {
	m := map[string]string{}
	for _, r := range egressRules {
		for _, g := range r.replaces {
			m[g] = r.id
		}
	}
	return m
}

func exampleSuffix(noun string) string {
	if noun == "" {
		noun = "key"
	}
	return " (an example " + strings.TrimSpace(noun) + ")"
}
