/*
 * crelay: the floor of any terminal relay on this machine, for ahpbench.
 *
 * Not part of ahpd. It is a measuring instrument: the least a separate
 * process can do to put a PTY behind a loopback socket. One epoll loop in
 * C copies bytes between one TCP connection and a PTY running
 * `stty raw -echo; printf R; exec cat` (termbench.EchoCommand: R is
 * ready, no more echo from the tty), with no WebSocket, no protocol, no
 * allocation and no threads. ahpbench compiles it with the system's C
 * compiler (`cc`) when there is one and times keystroke echo through it
 * next to the raw PTY echo, the Go relay and ahpd.
 *
 * `crelay COMMAND` runs COMMAND instead, on a PTY left as the line
 * discipline sets it up (as ahpd's terminals and the raw reader have
 * it), and sends its output in batches: it reads the PTY until it finds
 * it empty or 64 KiB are in hand, then writes them in one call, as ahpd
 * gathers a flood's reads before it frames them. ahpbench reads `cat` of
 * its test file through it: the floor of any relay's CPU per MB of
 * output, which a write per 4 KiB read would raise.
 *
 * It prints the port it listens on (127.0.0.1 only) and serves the first
 * connection. When the client closes, it exits; when the program's PTY
 * ends, it half-closes the connection and exits once the client closes
 * too, so that its CPU time can be read after the client has all the
 * output.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int writeAll(int to, const char *buf, size_t n) {
	for (size_t off = 0; off < n;) {
		ssize_t w = write(to, buf + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

/* batch reads the nonblocking PTY m until it is empty or buf is full and
 * writes what it read to s in one call. -1: the PTY ended (EIO, after
 * writing what came before) or the write failed. */
static int batch(int m, int s, char *buf, size_t size) {
	size_t n = 0;
	int end = 0;
	while (n < size) {
		ssize_t r = read(m, buf + n, size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			break;
		if (r <= 0) {
			end = 1;
			break;
		}
		n += (size_t)r;
	}
	if (n > 0 && writeAll(s, buf, n) != 0)
		return -1;
	return end ? -1 : 0;
}

static int copy(int from, int to, char *buf, size_t size) {
	ssize_t n = read(from, buf, size);
	if (n < 0 && errno == EINTR)
		return 0;
	if (n <= 0)
		return -1;
	return writeAll(to, buf, (size_t)n);
}

int main(int argc, char **argv) {
	const char *command = "stty raw -echo; printf R; exec cat";
	int batched = argc > 1;
	if (batched)
		command = argv[1];
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in addr = {.sin_family = AF_INET};
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof addr;
	if (ls < 0 || bind(ls, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(ls, 1) != 0 ||
	    getsockname(ls, (struct sockaddr *)&addr, &len) != 0) {
		perror("crelay: listen");
		return 1;
	}
	printf("%d\n", ntohs(addr.sin_port));
	fflush(stdout);
	int s = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
	if (s < 0) {
		perror("crelay: accept");
		return 1;
	}
	close(ls);
	int one = 1;
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

	int m;
	pid_t pid = forkpty(&m, NULL, NULL, NULL);
	if (pid < 0) {
		perror("crelay: forkpty");
		return 1;
	}
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", command, (char *)NULL);
		_exit(127);
	}

	if (batched && fcntl(m, F_SETFL, fcntl(m, F_GETFL) | O_NONBLOCK) != 0) {
		perror("crelay: fcntl");
		return 1;
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN};
	ev.data.fd = s;
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev) != 0) {
		perror("crelay: epoll");
		return 1;
	}
	ev.data.fd = m;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, m, &ev) != 0) {
		perror("crelay: epoll");
		return 1;
	}
	static char buf[65536];
	int ptyEnded = 0;
	for (;;) {
		struct epoll_event ready[2];
		int n = epoll_wait(ep, ready, 2, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		int done = 0;
		for (int i = 0; i < n && !done; i++) {
			int from = ready[i].data.fd;
			if (from == s)
				done = copy(s, m, buf, sizeof buf) != 0;
			else if (batched)
				ptyEnded = done = batch(m, s, buf, sizeof buf) != 0;
			else
				ptyEnded = done = copy(m, s, buf, sizeof buf) != 0;
		}
		if (done)
			break;
	}
	if (ptyEnded) {
		/* The client has all the output once it reads the end of it;
		 * wait until it closes, then go. */
		shutdown(s, SHUT_WR);
		for (;;) {
			ssize_t r = read(s, buf, sizeof buf);
			if (r == 0 || (r < 0 && errno != EINTR))
				break;
		}
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return 0;
}
