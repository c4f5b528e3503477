package deploytest

// TestImage: the image built from the Dockerfile (on local bases) runs as users get it: its
// default command serves the embedded demo pack on SQLite in the data volume, with a read-only
// root filesystem, as user 65532, without a shell; `IMAGE dev llm` and `IMAGE wallet …` run
// from other containers, and the wallet logs in and chats (a /call and a tool call through the
// scripted model); SIGTERM stops it cleanly (exit status 0, not killed).

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestImage(t *testing.T) {
	buildImage(t)
	size, err := strconv.ParseInt(podman(t, "image", "inspect", "--format", "{{.Size}}", image), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s: %.1f MB", image, float64(size)/1e6)
	if cfg := podman(t, "image", "inspect", "--format", "{{.Config.User}} {{.Config.Entrypoint}} {{.Config.Cmd}}", image); cfg != "65532:65532 [/usr/local/bin/packbot] [serve]" {
		t.Fatalf("image config: %s", cfg)
	}

	id := strconv.FormatInt(time.Now().UnixNano(), 36)
	net := "pbimg-" + id
	podman(t, "network", "create", net)
	vol := "pbimg-data-" + id
	t.Cleanup(func() {
		_, _ = tryRun("", nil, "podman", "rm", "-f", "-t", "0", "pbimg-bot-"+id, "pbimg-llm-"+id)
		_, _ = tryRun("", nil, "podman", "volume", "rm", "-f", vol)
		_, _ = tryRun("", nil, "podman", "network", "rm", "-f", net)
	})

	// The scripted model, from the same image.
	// Each container at a fixed address of the network: a name (--network-alias) is registered
	// with podman's DNS only as its container starts, and a lookup that misses it goes to the
	// host's resolver, which has no network here: 20 s lost, a DIDComm connection or a model
	// call given up (1 run in 4 with names).
	llmIP, botIP, walletIP := hostInNetwork(t, net, 201), hostInNetwork(t, net, 202), hostInNetwork(t, net, 200)
	podman(t, "run", "-d", "--name", "pbimg-llm-"+id, "--network", net, "--ip", llmIP, "--read-only",
		image, "dev", "llm", "--http", "0.0.0.0:8090")
	// The bot: nothing but the image's defaults, its public URL, the model and a read-only root.
	port := freePort(t)
	bot := "pbimg-bot-" + id
	podman(t, "run", "-d", "--name", bot, "--network", net, "--ip", botIP, "--read-only",
		"-v", vol+":/var/lib/packbot/data", "-p", fmt.Sprintf("127.0.0.1:%d:8080", port),
		"-e", "PACKBOT_PUBLIC_URL=http://"+botIP+":8080", "-e", "OPENAI_BASE_URL=http://"+llmIP+":8090/v1", image)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the bot's log:\n%s", logs(bot))
		}
	})
	ctx := ctxFor(t, 3*time.Minute)
	if err := waitFor(ctx, "the bot's /readyz", func() bool { return status(fmt.Sprintf("http://127.0.0.1:%d/readyz", port)) == 200 }); err != nil {
		t.Fatalf("%v\n%s", err, logs(bot))
	}
	if ro := podman(t, "inspect", "--format", "{{.HostConfig.ReadonlyRootfs}}", bot); ro != "true" {
		t.Fatalf("read-only root: %s", ro)
	}
	if users := podman(t, "top", bot, "huser"); !strings.Contains(users, "65532") || strings.Contains(users, "root") {
		t.Fatalf("processes run as:\n%s", users)
	}
	for _, sh := range []string{"/bin/sh", "/bin/bash", "/usr/bin/sh"} {
		if _, err := tryRun("", nil, "podman", "exec", bot, sh, "-c", "true"); err == nil {
			t.Fatalf("the image has a shell: %s", sh)
		}
	}

	// A wallet in another container of the same image; its folder is bound from the host, where
	// its credential is issued.
	dir := t.TempDir()
	wdir := filepath.Join(dir, "ana")
	issue(t, wdir, filepath.Join(dir, "ana.json"), "ana@acme.corp", "employee")
	chownData(t, dir)
	w := startWallet(t, "ana", exec.Command("podman", "run", "-i", "--rm", "--name", "pbimg-wallet-"+id,
		"--network", net, "--ip", walletIP, "--read-only", "-v", dir+":/var/lib/packbot/data",
		image, "wallet", "--scripted", "--data-dir", "ana", "--http", "0.0.0.0:7000", "--endpoint", "http://"+walletIP+":7000",
		"--invitation", "http://"+botIP+":8080/invitation", "--credential", "ana.json", "--name", "Ana"))
	w.login()
	w.say(`/call get_exchange_rate {"from":"EUR","to":"USD"}`, `"to":"USD"`)
	w.say(`get_exchange_rate {"from":"EUR","to":"GBP"}`, "get_exchange_rate said:")
	w.stop()

	// SIGTERM (podman stop) within the grace period: a clean exit, not a kill.
	podman(t, "stop", "-t", "20", bot)
	if code := podman(t, "inspect", "--format", "{{.State.ExitCode}}", bot); code != "0" {
		t.Fatalf("exit status after SIGTERM: %s\n%s", code, logs(bot))
	}
	if _, err := os.Stat(filepath.Join(dir, "ana", "state.json")); err != nil {
		t.Fatalf("the wallet kept no state in its volume: %v", err)
	}
}

// hostInNetwork returns the address numbered n in the IPv4 subnet of podman network net.
func hostInNetwork(t *testing.T, net string, n int) string {
	t.Helper()
	cidr := podman(t, "network", "inspect", "--format", "{{range .Subnets}}{{.Subnet}} {{end}}", net)
	p, err := netip.ParsePrefix(strings.Fields(cidr + " ")[0])
	if err != nil || !p.Addr().Is4() || p.Bits() > 24 {
		t.Fatalf("network %s: subnet %q, want an IPv4 /24 or larger (%v)", net, cidr, err)
	}
	a := p.Masked().Addr().As4()
	a[3] = byte(n)
	return netip.AddrFrom4(a).String()
}

// logs returns a container's last log lines, for failure messages.
func logs(container string) string {
	out, _ := exec.Command("podman", "logs", "--tail", "60", container).CombinedOutput()
	return string(out)
}
