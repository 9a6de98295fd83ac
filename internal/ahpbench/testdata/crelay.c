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
 * It prints the port it listens on (127.0.0.1 only), serves the first
 * connection and exits when either side closes.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int copy(int from, int to, char *buf, size_t size) {
	ssize_t n = read(from, buf, size);
	if (n < 0 && errno == EINTR)
		return 0;
	if (n <= 0)
		return -1;
	for (ssize_t off = 0; off < n;) {
		ssize_t w = write(to, buf + off, (size_t)(n - off));
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		off += w;
	}
	return 0;
}

int main(void) {
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
		execl("/bin/sh", "sh", "-c", "stty raw -echo; printf R; exec cat", (char *)NULL);
		_exit(127);
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
			done = copy(from, from == s ? m : s, buf, sizeof buf) != 0;
		}
		if (done)
			break;
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return 0;
}
