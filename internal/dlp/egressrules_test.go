package dlp

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const (
	alnum  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upnum  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b64    = alnum + "+/"
	urlb64 = alnum + "-_"
	hexlow = "0123456789abcdef"
)

// fakeToken returns n characters of alphabet, the same for a given seed: test values shaped like
// credentials, issued by no one.
func fakeToken(seed uint64, alphabet string, n int) string {
	rng := rand.New(rand.NewPCG(seed, 0x5ec))
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

func TestCloudKeys(t *testing.T) {
	akia := "AKIA" + fakeToken(1, upnum, 16)
	asia := "ASIA" + fakeToken(2, upnum, 16)
	secret := fakeToken(3, b64, 40)
	if !mixedCase([]byte(secret)) {
		t.Fatal("fake secret has one case")
	}
	gcp := "AIza" + fakeToken(4, urlb64, 35)
	azKey := fakeToken(5, b64, 86) + "=="
	runDetectorCases(t, only(DetectorSecret), DetectorSecret, []detectorCase{
		{"aws access key", "aws_access_key_id=" + akia, akia},
		{"aws temporary key in json", `{"AccessKeyId":"` + asia + `"}`, asia},
		{"aws key in a url path", "/upload/" + akia + "/x", akia},
		{"aws key in a query", "key=" + akia + "&v=1", akia},
		{"aws documentation key", "AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"},
		{"aws secret assignment", "aws_secret_access_key = " + secret, secret},
		{"aws secret env", "AWS_SECRET_ACCESS_KEY=" + secret + "\n", secret},
		{"aws secret sts json", `"SecretAccessKey": "` + secret + `",`, secret},
		{"gcp api key", "https://maps.googleapis.com/maps/api/geocode/json?address=x&key=" + gcp, gcp},
		{"gcp api key followed by &", "key=" + gcp + "&q=1", gcp},
		{"gcp service account", `{"type": "service_account", "private_key_id": "` + fakeToken(6, hexlow, 40) + `"}`, fakeToken(6, hexlow, 40)},
		{"google oauth client secret", "client_secret=GOCSPX-" + fakeToken(7, urlb64, 28), "GOCSPX-" + fakeToken(7, urlb64, 28)},
		{"google access token", "Authorization: Bearer ya29." + fakeToken(8, urlb64, 120), "ya29." + fakeToken(8, urlb64, 120)},
		{"google refresh token", `"refresh_token":"1//0` + fakeToken(9, urlb64, 100) + `"`, "1//0" + fakeToken(9, urlb64, 100)},
		{"azure connection string", "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + azKey + ";EndpointSuffix=core.windows.net", azKey},
		{"azure storage key env", "AZURE_STORAGE_KEY=" + azKey, azKey},
		{"azure service bus", "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=RootManageSharedAccessKey;SharedAccessKey=" + fakeToken(10, b64, 43) + "=", fakeToken(10, b64, 43) + "="},

		{"aws key too short", "AKIA" + fakeToken(1, upnum, 15), ""},
		{"aws key lower case", strings.ToLower(akia), ""},
		{"aws placeholder", "AKIAXXXXXXXXXXXXXXXX", ""},
		{"aws secret reference", "aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}", ""},
		{"sha-1 after secret_access_key", "secret_access_key_sha1: " + fakeToken(11, hexlow, 40), ""},
		{"aws arn", "arn:aws:iam::123456789012:role/deploy-role", ""},
		{"s3 url", "https://my-bucket.s3.us-east-1.amazonaws.com/reports/2024/q3.csv", ""},
		{"google api key too short", "AIza" + fakeToken(4, urlb64, 20), ""},
		{"private_key_id not hex", `"private_key_id": "` + fakeToken(12, "ghijklmnopqrstuv", 40) + `"`, ""},
		{"ya29 too short", "ya29.abc", ""},
		{"azure key name only", "SharedAccessKeyName=RootManageSharedAccessKey;EntityPath=queue", ""},
		{"azure blob url", "https://acct.blob.core.windows.net/container/file.txt", ""},
		{"gcp project id", `{"project_id": "my-project-123456", "client_email": "svc@my-project-123456.iam.gserviceaccount.com"}`, ""},
	})
}

// TestAWSKeyPairs checks the rule for a secret access key next to its key id: both are found.
func TestAWSKeyPairs(t *testing.T) {
	s := newScanner(t, only(DetectorSecret))
	akia := "AKIA" + fakeToken(21, upnum, 16)
	secret := fakeToken(22, b64, 40)
	for _, text := range []string{
		akia + ":" + secret,
		"Access key ID,Secret access key\n" + akia + "," + secret + "\n",
		secret + " " + akia,
		"[default]\naws_access_key_id = " + akia + "\naws_secret_access_key = " + secret + "\n",
	} {
		v := s.ScanBytes("x", []byte(text))
		var got []string
		for _, f := range v.Findings {
			got = append(got, f.Rule+"="+text[f.Offset:f.Offset+f.Length])
		}
		if len(got) != 2 || !strings.Contains(strings.Join(got, " "), "aws-secret-access-key="+secret) {
			t.Errorf("%q: found %q", text, got)
		}
	}
	// 40 hex digits (a SHA-1) next to a key id is not a secret key.
	if v := s.ScanBytes("x", []byte(akia+" "+fakeToken(23, hexlow, 40))); len(v.Findings) != 1 {
		t.Errorf("sha-1 next to a key id: %+v", v.Findings)
	}
}

func TestGitHostingTokens(t *testing.T) {
	ghp := "ghp_" + fakeToken(31, alnum, 36)
	runDetectorCases(t, only(DetectorSecret), DetectorSecret, []detectorCase{
		{"github classic", "GITHUB_TOKEN=" + ghp, ghp},
		{"github classic 34 characters", "token " + ghp[:34], ghp[:34]},
		{"github classic in a url", "https://x-access-token:" + ghp + "@github.com/o/r.git", ghp},
		{"github oauth", "gho_" + fakeToken(32, alnum, 36), "gho_" + fakeToken(32, alnum, 36)},
		{"github user-to-server", "ghu_" + fakeToken(33, alnum, 36), "ghu_" + fakeToken(33, alnum, 36)},
		{"github installation", `{"token":"ghs_` + fakeToken(34, alnum, 36) + `"}`, "ghs_" + fakeToken(34, alnum, 36)},
		{"github refresh", "ghr_" + fakeToken(35, alnum, 76), "ghr_" + fakeToken(35, alnum, 76)},
		{"github fine-grained", "github_pat_11" + fakeToken(36, alnum, 20) + "_" + fakeToken(37, alnum, 59), "github_pat_11" + fakeToken(36, alnum, 20) + "_" + fakeToken(37, alnum, 59)},
		{"github fine-grained short", "github_pat_" + fakeToken(38, alnum, 40), "github_pat_" + fakeToken(38, alnum, 40)},
		{"gitlab pat", "PRIVATE-TOKEN: glpat-" + fakeToken(39, urlb64, 20), "glpat-" + fakeToken(39, urlb64, 20)},
		{"gitlab routable pat", "glpat-" + fakeToken(40, urlb64, 27) + ".01.0" + fakeToken(41, "0123456789abcdefghijklmnopqrstuvwxyz", 8), "glpat-" + fakeToken(40, urlb64, 27) + ".01.0" + fakeToken(41, "0123456789abcdefghijklmnopqrstuvwxyz", 8)},
		{"gitlab deploy token", "gldt-" + fakeToken(42, urlb64, 20), "gldt-" + fakeToken(42, urlb64, 20)},
		{"gitlab runner token", "glrt-" + fakeToken(43, urlb64, 30), "glrt-" + fakeToken(43, urlb64, 30)},
		{"gitlab runner registration", "GR1348941" + fakeToken(44, urlb64, 20), "GR1348941" + fakeToken(44, urlb64, 20)},
		{"bitbucket app password", "ATBB" + fakeToken(45, alnum, 32), "ATBB" + fakeToken(45, alnum, 32)},
		{"atlassian api token", "ATATT3xFfGF0" + fakeToken(46, urlb64, 180), "ATATT3xFfGF0" + fakeToken(46, urlb64, 180)},
		{"bitbucket access token", "Bearer ATCTT3xFfGN0" + fakeToken(47, urlb64, 180), "ATCTT3xFfGN0" + fakeToken(47, urlb64, 180)},

		{"github token too short", "ghp_" + fakeToken(31, alnum, 19), ""},
		{"github placeholder", "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", ""},
		{"github prefix in prose", "the ghp_ prefix marks classic tokens", ""},
		{"git commit", "commit e07b521a8c4f3d2b9e1f0a6c5d4e3f2a1b0c9d8e", ""},
		{"github url", "https://github.com/agentbox-dev/agentbox/pull/1234/files", ""},
		{"github raw url", "https://raw.githubusercontent.com/golang/go/master/src/go.mod", ""},
		{"fine-grained too short", "github_pat_abc123", ""},
		{"gitlab pat too short", "glpat-abc", ""},
		{"gitlab api url", "https://gitlab.com/api/v4/projects/12345/merge_requests?state=opened", ""},
		{"bitbucket too short", "ATBB1234", ""},
		{"branch name", "refs/heads/feature/glrt-runner-docs", ""},
	})
}

func TestModelProviderKeys(t *testing.T) {
	proj := "sk-proj-" + fakeToken(51, urlb64, 74) + "T3BlbkFJ" + fakeToken(52, urlb64, 74)
	legacy := "sk-" + fakeToken(53, alnum, 48)
	ant := "sk-ant-api03-" + fakeToken(54, urlb64, 93) + "AA"
	runDetectorCases(t, only(DetectorSecret), DetectorSecret, []detectorCase{
		{"openai project key", "Authorization: Bearer " + proj, proj},
		{"openai project key without marker", "OPENAI_API_KEY=sk-proj-" + fakeToken(55, urlb64, 100), "sk-proj-" + fakeToken(55, urlb64, 100)},
		{"openai legacy", `openai.api_key = "` + legacy + `"`, legacy},
		{"openai service account", "sk-svcacct-" + fakeToken(56, urlb64, 80), "sk-svcacct-" + fakeToken(56, urlb64, 80)},
		{"anthropic", "x-api-key: " + ant, ant},
		{"anthropic admin", "sk-ant-admin01-" + fakeToken(57, urlb64, 93) + "AA", "sk-ant-admin01-" + fakeToken(57, urlb64, 93) + "AA"},
		{"anthropic oauth", "sk-ant-oat01-" + fakeToken(58, urlb64, 80), "sk-ant-oat01-" + fakeToken(58, urlb64, 80)},
		{"google ai", "GEMINI_API_KEY=AIza" + fakeToken(59, urlb64, 35), "AIza" + fakeToken(59, urlb64, 35)},
		{"hugging face", "HF_TOKEN=hf_" + fakeToken(60, alnum, 34), "hf_" + fakeToken(60, alnum, 34)},
		{"hugging face org", "api_org_" + fakeToken(61, alnum, 34), "api_org_" + fakeToken(61, alnum, 34)},
		{"groq", "gsk_" + fakeToken(62, alnum, 52), "gsk_" + fakeToken(62, alnum, 52)},
		{"mistral", "MISTRAL_API_KEY=" + fakeToken(63, alnum, 32), fakeToken(63, alnum, 32)},
		{"cohere client", `co = cohere.Client("` + fakeToken(64, alnum, 40) + `")`, fakeToken(64, alnum, 40)},
		{"cohere env", "COHERE_API_KEY=" + fakeToken(65, alnum, 40), fakeToken(65, alnum, 40)},
		{"xai", "xai-" + fakeToken(66, alnum, 80), "xai-" + fakeToken(66, alnum, 80)},
		{"perplexity", "pplx-" + fakeToken(67, alnum, 48), "pplx-" + fakeToken(67, alnum, 48)},
		{"openrouter", "sk-or-v1-" + fakeToken(68, hexlow, 64), "sk-or-v1-" + fakeToken(68, hexlow, 64)},
		{"replicate", "REPLICATE_API_TOKEN=r8_" + fakeToken(69, alnum, 37), "r8_" + fakeToken(69, alnum, 37)},

		{"sk- too short", "sk-abc123", ""},
		{"task id", "task-" + fakeToken(70, alnum, 40), ""},
		{"anthropic too short", "sk-ant-api03-abc", ""},
		{"hugging face variable", "hf_tokenizer_config_path", ""},
		{"hugging face one case", "hf_" + strings.ToLower(fakeToken(60, alnum, 34)), ""},
		{"model name", `{"model":"mistral-large-2407","messages":[]}`, ""},
		{"cohere model", `{"model":"command-r-plus","connector":"cohere"}`, ""},
		{"groq too short", "gsk_abc", ""},
		{"openai base url", "https://api.openai.com/v1/chat/completions", ""},
		{"anthropic version header", "anthropic-version: 2023-06-01", ""},
		{"xai model", "grok-2-latest via xai-sdk", ""},
		{"hf model id", "meta-llama/Llama-3.1-8B-Instruct", ""},
	})
}

func TestPaymentKeys(t *testing.T) {
	live := "sk_live_51" + fakeToken(71, alnum, 97)
	runDetectorCases(t, only(DetectorSecret), DetectorSecret, []detectorCase{
		{"stripe live", "Authorization: Bearer " + live, live},
		{"stripe live short", "sk_live_" + fakeToken(72, alnum, 24), "sk_live_" + fakeToken(72, alnum, 24)},
		{"stripe test", "STRIPE_SECRET_KEY=sk_test_" + fakeToken(73, alnum, 99), "sk_test_" + fakeToken(73, alnum, 99)},
		{"stripe restricted live", "rk_live_" + fakeToken(74, alnum, 99), "rk_live_" + fakeToken(74, alnum, 99)},
		{"stripe restricted test", "rk_test_" + fakeToken(75, alnum, 60), "rk_test_" + fakeToken(75, alnum, 60)},
		{"stripe documentation key", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "sk_test_4eC39HqLyjWDarjtT1zdp7dc"},
		{"stripe webhook secret", "STRIPE_WEBHOOK_SECRET=whsec_" + fakeToken(76, alnum, 32), "whsec_" + fakeToken(76, alnum, 32)},
		{"stripe key in form", "api_key=" + live + "&amount=100", live},
		{"stripe key in json", `{"stripe_key":"` + live + `"}`, live},
		{"stripe key in url", "/v1/charges/" + live, live},

		{"publishable live", "pk_live_" + fakeToken(77, alnum, 99), ""},
		{"publishable test", "pk_test_" + fakeToken(78, alnum, 99), ""},
		{"stripe too short", "sk_live_abc", ""},
		{"account id", "acct_1032D82eZvKYlo2C", ""},
		{"customer id", "cus_NffrFeUfNV2Hib", ""},
		{"payment intent client secret", "pi_3MtwBwLkdIwHu7ix28a3tqPa_secret_YrKJUKribcBjcG8HVhfZluoGH", ""},
		{"price id", "price_1MoBy5LkdIwHu7ixZhnattbh", ""},
		{"event id", "evt_1NG8Du2eZvKYlo2CUI79vXWy", ""},
		{"webhook secret too short", "whsec_abc", ""},
		{"stripe url", "https://api.stripe.com/v1/payment_intents?limit=3", ""},
	})
}

func TestChatTokens(t *testing.T) {
	xoxb := "xoxb-" + fakeToken(81, "0123456789", 13) + "-" + fakeToken(82, "0123456789", 13) + "-" + fakeToken(83, alnum, 24)
	hook := "https://hooks.slack.com/services/T" + fakeToken(84, upnum, 8) + "/B" + fakeToken(85, upnum, 10) + "/" + fakeToken(86, alnum, 24)
	discord := "https://discord.com/api/webhooks/" + fakeToken(87, "0123456789", 19) + "/" + fakeToken(88, urlb64, 68)
	tg := fakeToken(89, "123456789", 10) + ":AA" + fakeToken(90, urlb64, 33)
	runDetectorCases(t, only(DetectorSecret), DetectorSecret, []detectorCase{
		{"slack bot token", "SLACK_BOT_TOKEN=" + xoxb, xoxb},
		{"slack user token", "xoxp-" + fakeToken(91, "0123456789", 12) + "-" + fakeToken(92, "0123456789", 12) + "-" + fakeToken(93, hexlow, 32), "xoxp-" + fakeToken(91, "0123456789", 12) + "-" + fakeToken(92, "0123456789", 12) + "-" + fakeToken(93, hexlow, 32)},
		{"slack app token", "xapp-1-A" + fakeToken(94, upnum, 10) + "-" + fakeToken(95, "0123456789", 13) + "-" + fakeToken(96, hexlow, 64), "xapp-1-A" + fakeToken(94, upnum, 10) + "-" + fakeToken(95, "0123456789", 13) + "-" + fakeToken(96, hexlow, 64)},
		{"slack webhook", `{"url":"` + hook + `"}`, hook},
		{"slack webhook without scheme", "hooks.slack.com/workflows/T" + fakeToken(97, upnum, 8) + "/A" + fakeToken(98, upnum, 10) + "/" + fakeToken(99, alnum, 30), "hooks.slack.com/workflows/T" + fakeToken(97, upnum, 8) + "/A" + fakeToken(98, upnum, 10) + "/" + fakeToken(99, alnum, 30)},
		{"discord webhook", "post to " + discord + " now", discord},
		{"discord webhook ptb", "https://ptb.discord.com/api/webhooks/" + fakeToken(100, "0123456789", 18) + "/" + fakeToken(101, urlb64, 68), "https://ptb.discord.com/api/webhooks/" + fakeToken(100, "0123456789", 18) + "/" + fakeToken(101, urlb64, 68)},
		{"discordapp webhook", "https://discordapp.com/api/webhooks/" + fakeToken(102, "0123456789", 18) + "/" + fakeToken(103, urlb64, 68), "https://discordapp.com/api/webhooks/" + fakeToken(102, "0123456789", 18) + "/" + fakeToken(103, urlb64, 68)},
		{"telegram bot token", "BOT_TOKEN=" + tg, tg},
		{"telegram api url", "https://api.telegram.org/bot" + tg + "/sendMessage", tg},

		{"xoxo", "hugs and xoxo-from-me, see you", ""},
		{"slack token too short", "xoxb-123", ""},
		{"slack api url", "https://slack.com/api/chat.postMessage", ""},
		{"slack channel id", `{"channel":"C024BE91L","ts":"1503435956.000247"}`, ""},
		{"hooks host alone", "https://hooks.slack.com/", ""},
		{"discord channel api", "https://discord.com/api/v10/channels/" + fakeToken(104, "0123456789", 18) + "/messages", ""},
		{"discord invite", "https://discord.gg/abc123XYZ", ""},
		{"telegram link", "https://t.me/joinchat/AAAAAEhCuV1", ""},
		{"telegram too short", "12345:AAA", ""},
		{"time stamp", "2024-01-15T10:30:00Z", ""},
	})
}

func TestDatabaseURLs(t *testing.T) {
	pw := fakeToken(111, alnum, 20)
	runDetectorCases(t, only(DetectorSecret), DetectorSecret, []detectorCase{
		{"postgres", "DATABASE_URL=postgres://app:" + pw + "@db.internal:5432/app", pw},
		{"postgresql driver", "postgresql+psycopg2://app:" + pw + "@10.0.0.5/app", pw},
		{"mysql", `dsn: "mysql://root:` + pw + `@mysql:3306/shop"`, pw},
		{"mongodb srv", "mongodb+srv://svc:" + pw + "@cluster0.ab1cd.mongodb.net/?retryWrites=true", pw},
		{"redis empty user", "redis://:" + pw + "@cache:6379/0", pw},
		{"rediss", "rediss://default:" + pw + "@redis.example.net:6380", pw},
		{"amqp", "amqp://guest:" + pw + "@rabbit:5672/", pw},
		{"example password", "postgres://user:secret@localhost/db", "secret"},
		{"symbols in password", "postgres://u:p%40ss!w0rd-" + pw + "@h/d", "p%40ss!w0rd-" + pw},
		{"in json", `{"db":"mysql://app:` + pw + `@db/app"}`, pw},
		{"clickhouse", "clickhouse://default:" + pw + "@ch:9000/default", pw},

		{"no password", "postgres://app@db.internal:5432/app", ""},
		{"no user info", "postgres://db.internal:5432/app", ""},
		{"env reference", "postgres://app:${DB_PASSWORD}@db/app", ""},
		{"shell reference", "postgres://app:$PGPASSWORD@db/app", ""},
		{"placeholder", "postgres://<user>:<password>@<host>/<db>", ""},
		{"masked", "postgres://app:****@db/app", ""},
		{"template", "mysql://{{ .User }}:{{ .Password }}@db/app", ""},
		{"whole url reference", "DATABASE_URL=${DATABASE_URL}", ""},
		{"redis no auth", "redis://localhost:6379/0", ""},
		{"web url with password", "https://user:" + pw + "@example.com/", ""},
		{"prose", "we use postgres and redis for state", ""},
	})
}

// TestExampleKeys: documentation and example keys are reported like real ones, and the reason
// says they are examples (issue 13: an example AWS key in a header is blocked).
func TestExampleKeys(t *testing.T) {
	s := newScanner(t, Config{})
	for _, c := range []struct{ name, text, rule string }{
		{"aws access key", "AKIAIOSFODNN7EXAMPLE", "aws-access-token"},
		{"aws secret", "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws-secret-access-key"},
		{"google documented key", "AIzaSyDMAScliyLx7F0NPDEJi1QmyCgHIAODrlU", "gcp-api-key"},
		{"stripe documented key", "sk_test_4eC39HqLyjWDarjtT1zdp7dc", "stripe-access-token"},
		{"a key that says so", "ghp_EXAMPLE" + fakeToken(120, alnum, 29), "github-pat"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "https://api.example.com/", nil)
			r.Header.Set("X-Key", c.text)
			v, err := s.ScanRequest(r)
			if err != nil {
				t.Fatal(err)
			}
			if v.Action != ActionBlock || len(v.Findings) == 0 || v.Findings[0].Rule != c.rule {
				t.Fatalf("verdict %v %+v", v.Action, v.Findings)
			}
			if !strings.Contains(v.Reason, "(an example key) in the header X-Key") {
				t.Errorf("reason %q", v.Reason)
			}
		})
	}
	// A real-looking key is not called an example.
	v := s.ScanBytes("x", []byte("AKIA"+fakeToken(121, upnum, 16)))
	if v.Action != ActionBlock || strings.Contains(v.Reason, "example") {
		t.Errorf("verdict %v %q", v.Action, v.Reason)
	}
	// The example password of a database URL.
	v = s.ScanBytes("x", []byte("postgres://postgres:postgres@localhost/db"))
	if v.Action != ActionBlock || !strings.Contains(v.Reason, "a database URL with a password (an example password)") {
		t.Errorf("verdict %v %q", v.Action, v.Reason)
	}
}

// TestGenericStopwordCoverage: generic-api-key drops values made of dictionary words, not values
// that merely contain one (gitleaks drops both).
func TestGenericStopwordCoverage(t *testing.T) {
	s := newScanner(t, only(DetectorSecret))
	for text, want := range map[string]bool{
		`"auth_type": "oauth2_client_credentials"`:                    false,
		`token = "Xk9mP2vL7qR4_test_wN8zT5yB"`:                        true,
		`api_key = "Qz8rT2mVx7_client_Lp4sW9n"`:                       true,
		`"password": "correct-horse-battery-staple-2024"`:             true, // a passphrase, not stopwords
		`"auth_provider": "session_cache_manager_v2"`:                 false,
		"keyUsage := x509.KeyUsageDigitalSignature":                   false, // code, not a key
		`"encryptionKey": "EncryptionKey1024",`:                       false,
		`db_password = "MyS3cretP4ssw0rd"`:                            true,
		"SECRET_KEY=" + fakeToken(130, alnum, 12) + "example" + "Z9q": true,
	} {
		v := s.ScanBytes("x", []byte(text))
		if got := len(v.Findings) > 0; got != want {
			t.Errorf("%s: found %v (%+v), want %v", text, got, v.Findings, want)
		}
	}
}

// TestEgressTerminator: gitleaks' rules end a token at any character outside it, not only at a
// quote or a blank.
func TestEgressTerminator(t *testing.T) {
	s := newScanner(t, only(DetectorSecret))
	tok := "npm_" + fakeToken(140, alnum, 36)
	for _, text := range []string{"/registry/" + tok + "/x", "a=" + tok + "&b=1", "(" + tok + ")", tok + ","} {
		v := s.ScanBytes("x", []byte(text))
		if len(v.Findings) != 1 || v.Findings[0].Rule != "npm-access-token" {
			t.Errorf("%q: %+v", text, v.Findings)
		}
	}
}
