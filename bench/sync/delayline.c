/*
 * tenbin-delayline: a link with a rate and a one-way delay between two
 * network namespaces, for bench/sync/run on kernels without sch_netem.
 *
 *   tenbin-delayline NS_A DEV_A NS_B DEV_B DELAY_MS RATE [QUEUE_MS]
 *
 * It creates the tun device DEV_A in the namespace /run/netns/NS_A and
 * DEV_B in NS_B (the caller gives them addresses and brings them up),
 * then forwards every IP packet that one side sends to the other, as a
 * link would: a packet waits for the link to be free, takes len * 8 /
 * RATE seconds to cross it, arrives DELAY_MS later, and is dropped when
 * it would wait more than QUEUE_MS (20) for the link (a router's
 * buffer: TCP then sees loss, as it does on a real path).  RATE is tc's
 * syntax in bits/s: 1gbit, 500mbit, 100kbit or a bare number.
 *
 * Unlike a proxy, the endpoints' TCP sees the delay itself: slow start,
 * window growth and every request/answer round trip pay the RTT.  The
 * devices keep the MTU of an Internet path (1500), so TCP's segments and
 * its congestion window are those of one, but carry TCP segmentation
 * offload: the kernel hands over up to 64 KiB of segments at once (with
 * a virtio_net_hdr saying how to cut them), which go across as one, so
 * 1 Gbit/s is a few thousand packets a second, not 80,000.  The rate
 * counts the bytes of every segment cut, headers included.
 *
 * It prints "ready" on stdout once both devices exist, and its counts
 * on stderr when SIGTERM or SIGINT ends it.  Linux only; needs root.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

/* A packet with its virtio_net_hdr: GSO packets are up to 64 KiB (more
 * with BIG TCP, which a tun device does not take). */
#define DL_PKT_MAX (256 * 1024)
#define DL_VNET_LEN ((int)sizeof(struct virtio_net_hdr))
#define DL_READS_PER_WAKE 64

/* A packet in flight: owned by its direction's queue until written. */
struct dl_pkt {
  struct dl_pkt *next;
  uint64_t due_ns; /* when it reaches the other end */
  size_t len;
  unsigned char data[];
};

/* One direction of the link: packets read from in, written to out,
 * in the order they were read (the delay is the same for all). */
struct dl_dir {
  int in, out;
  uint64_t free_ns; /* when the link has sent what it holds */
  struct dl_pkt *head, *tail;
  uint64_t packets, bytes, dropped, lost_writes;
};

static volatile sig_atomic_t dl_stop;

static void
dl_on_signal(int sig)
{
  (void)sig;
  dl_stop = 1;
}

static uint64_t
dl_now(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* "1gbit", "250mbit", "64kbit", "1000000bit" or a bare number: bits/s;
 * 0 for anything else. */
static uint64_t
dl_parse_rate(const char *s)
{
  char *end;
  unsigned long long v;
  uint64_t mul = 1;

  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno != 0 || end == s || v == 0)
    return 0;
  if (*end == 'k' || *end == 'K')
    mul = 1000, end++;
  else if (*end == 'm' || *end == 'M')
    mul = 1000000, end++;
  else if (*end == 'g' || *end == 'G')
    mul = 1000000000, end++;
  if (strcmp(end, "bit") != 0 && *end != '\0')
    return 0;
  if (v > UINT64_MAX / mul)
    return 0;
  return (uint64_t)v * mul;
}

/* A positive count of milliseconds, or -1. */
static long
dl_parse_ms(const char *s)
{
  char *end;
  long v;

  errno = 0;
  v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 60000)
    return -1;
  return v;
}

/* The tun device name in the namespace ns: its fd, or -1 (said why). */
static int
dl_open_tun(const char *ns, const char *name)
{
  char path[256];
  struct ifreq ifr;
  int nsfd = -1, fd = -1, rc = -1;

  if (strlen(name) >= IFNAMSIZ) {
    fprintf(stderr, "delayline: device name '%s' is too long\n", name);
    return -1;
  }
  snprintf(path, sizeof(path), "/run/netns/%s", ns);
  nsfd = open(path, O_RDONLY | O_CLOEXEC);
  if (nsfd < 0 || setns(nsfd, CLONE_NEWNET) < 0) {
    fprintf(stderr, "delayline: cannot enter %s: %s\n", path,
            strerror(errno));
    goto out;
  }
  /* The device is made in the namespace current at TUNSETIFF and stays
   * there; the fd keeps working from any namespace. */
  fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    fprintf(stderr, "delayline: /dev/net/tun: %s\n", strerror(errno));
    goto out;
  }
  memset(&ifr, 0, sizeof(ifr));
  ifr.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR;
  memcpy(ifr.ifr_name, name, strlen(name));
  if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
    fprintf(stderr, "delayline: cannot create %s in %s: %s\n", name, ns,
            strerror(errno));
    goto out;
  }
  /* Segmentation and checksums left to the receiving side's stack, as
   * a virtio NIC would: packets pass as they were written. */
  if (ioctl(fd, TUNSETVNETHDRSZ, &(int){DL_VNET_LEN}) < 0 ||
      ioctl(fd, TUNSETOFFLOAD, (unsigned int)(TUN_F_CSUM | TUN_F_TSO4 |
                                              TUN_F_TSO6)) < 0) {
    fprintf(stderr, "delayline: cannot set offloads on %s: %s\n", name,
            strerror(errno));
    goto out;
  }
  rc = fd;
  fd = -1;

out:
  if (fd >= 0)
    close(fd);
  if (nsfd >= 0)
    close(nsfd);
  return rc;
}

/* The bytes that a packet read from a tun device (its virtio_net_hdr
 * first) puts on the wire: a GSO packet is cut into segments of
 * gso_size bytes, each with the IP and TCP headers again. */
static uint64_t
dl_wire_len(const unsigned char *p, size_t len)
{
  const struct virtio_net_hdr *h = (const void *)p;
  const unsigned char *ip = p + DL_VNET_LEN;
  size_t iplen = len - (size_t)DL_VNET_LEN, hdrs, payload;
  unsigned gso = le16toh(h->gso_size);

  if (h->gso_type == VIRTIO_NET_HDR_GSO_NONE || gso == 0 || iplen < 60)
    return iplen;
  if ((ip[0] >> 4) == 4)
    hdrs = (size_t)(ip[0] & 15) * 4;
  else
    hdrs = 40; /* IPv6 without extension headers: what TCP sends here */
  if (hdrs + 20 > iplen)
    return iplen;
  hdrs += (size_t)(ip[hdrs + 12] >> 4) * 4;
  if (hdrs >= iplen)
    return iplen;
  payload = iplen - hdrs;
  return payload + (payload + gso - 1) / gso * hdrs;
}

/* Read what d's input holds (a bounded number, so the other direction
 * and the deliveries wait little): each packet is queued or dropped. */
static void
dl_take(struct dl_dir *d, uint64_t rate, uint64_t delay_ns,
        uint64_t queue_ns, unsigned char *buf)
{
  for (int i = 0; i < DL_READS_PER_WAKE; i++) {
    ssize_t r = read(d->in, buf, DL_PKT_MAX);
    uint64_t now, start, wire;
    struct dl_pkt *p;

    if (r <= DL_VNET_LEN)
      return; /* EAGAIN: drained; an error shows as no more packets */
    now = dl_now();
    start = d->free_ns > now ? d->free_ns : now;
    if (start - now > queue_ns) {
      d->dropped++;
      continue;
    }
    p = malloc(sizeof(*p) + (size_t)r);
    if (p == NULL) {
      d->dropped++;
      continue;
    }
    /* Bits over bits per second, in ns; 128-bit so no rate overflows. */
    wire = dl_wire_len(buf, (size_t)r);
    d->free_ns = start + (uint64_t)((unsigned __int128)wire * 8 *
                                    1000000000u / rate);
    p->due_ns = d->free_ns + delay_ns;
    p->len = (size_t)r;
    p->next = NULL;
    memcpy(p->data, buf, (size_t)r);
    if (d->tail != NULL)
      d->tail->next = p;
    else
      d->head = p;
    d->tail = p;
    d->packets++;
    d->bytes += wire;
  }
}

/* Write the packets whose time has come. */
static void
dl_deliver(struct dl_dir *d, uint64_t now)
{
  while (d->head != NULL && d->head->due_ns <= now) {
    struct dl_pkt *p = d->head;

    if (write(d->out, p->data, p->len) != (ssize_t)p->len)
      d->lost_writes++; /* the receiving side's queue is full: a loss */
    d->head = p->next;
    if (d->head == NULL)
      d->tail = NULL;
    free(p);
  }
}

static void
dl_free_queue(struct dl_dir *d)
{
  while (d->head != NULL) {
    struct dl_pkt *p = d->head;

    d->head = p->next;
    free(p);
  }
  d->tail = NULL;
}

int
main(int argc, char **argv)
{
  struct dl_dir dir[2];
  struct sigaction sa;
  sigset_t stops, in_poll;
  unsigned char *buf = NULL;
  uint64_t rate, delay_ns, queue_ns;
  long delay_ms, queue_ms = 20;
  int fa = -1, fb = -1, rc = 1;

  if (argc != 7 && argc != 8) {
    fprintf(stderr, "usage: %s NS_A DEV_A NS_B DEV_B DELAY_MS RATE "
            "[QUEUE_MS]\n", argv[0]);
    return 2;
  }
  delay_ms = dl_parse_ms(argv[5]);
  rate = dl_parse_rate(argv[6]);
  if (argc == 8)
    queue_ms = dl_parse_ms(argv[7]);
  if (delay_ms < 0 || rate == 0 || queue_ms < 0) {
    fprintf(stderr, "delayline: bad DELAY_MS, RATE or QUEUE_MS\n");
    return 2;
  }
  memset(dir, 0, sizeof(dir));
  delay_ns = (uint64_t)delay_ms * 1000000u;
  queue_ns = (uint64_t)queue_ms * 1000000u;

  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = dl_on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  /* Delivered only inside ppoll, so a stop cannot slip in between the
   * loop's test and a wait with no timeout. */
  sigemptyset(&stops);
  sigaddset(&stops, SIGTERM);
  sigaddset(&stops, SIGINT);
  sigprocmask(SIG_BLOCK, &stops, &in_poll);
  sigdelset(&in_poll, SIGTERM);
  sigdelset(&in_poll, SIGINT);

  fa = dl_open_tun(argv[1], argv[2]);
  if (fa < 0)
    goto out;
  fb = dl_open_tun(argv[3], argv[4]);
  if (fb < 0)
    goto out;
  buf = malloc(DL_PKT_MAX);
  if (buf == NULL)
    goto out;
  dir[0].in = fa, dir[0].out = fb;
  dir[1].in = fb, dir[1].out = fa;
  printf("ready\n");
  fflush(stdout);

  while (!dl_stop) {
    struct pollfd pfd[2] = {{fa, POLLIN, 0}, {fb, POLLIN, 0}};
    struct timespec ts, *tsp = NULL;
    uint64_t now = dl_now(), next = UINT64_MAX;

    for (int k = 0; k < 2; k++) {
      dl_deliver(&dir[k], now);
      if (dir[k].head != NULL && dir[k].head->due_ns < next)
        next = dir[k].head->due_ns;
    }
    if (next != UINT64_MAX) {
      uint64_t wait = next > now ? next - now : 0;

      ts.tv_sec = (time_t)(wait / 1000000000u);
      ts.tv_nsec = (long)(wait % 1000000000u);
      tsp = &ts;
    }
    /* ppoll: a timeout in ns (poll's ms would add up to 1 ms of delay). */
    if (ppoll(pfd, 2, tsp, &in_poll) < 0) {
      if (errno == EINTR)
        continue;
      fprintf(stderr, "delayline: poll: %s\n", strerror(errno));
      goto out;
    }
    for (int k = 0; k < 2; k++)
      if (pfd[k].revents & POLLIN)
        dl_take(&dir[k], rate, delay_ns, queue_ns, buf);
  }
  fprintf(stderr, "delayline: %s->%s %llu packets %llu bytes %llu dropped "
          "%llu lost; %s->%s %llu packets %llu bytes %llu dropped %llu "
          "lost\n", argv[2], argv[4],
          (unsigned long long)dir[0].packets, (unsigned long long)dir[0].bytes,
          (unsigned long long)dir[0].dropped,
          (unsigned long long)dir[0].lost_writes, argv[4], argv[2],
          (unsigned long long)dir[1].packets, (unsigned long long)dir[1].bytes,
          (unsigned long long)dir[1].dropped,
          (unsigned long long)dir[1].lost_writes);
  rc = 0;

out:
  dl_free_queue(&dir[0]);
  dl_free_queue(&dir[1]);
  free(buf);
  if (fa >= 0)
    close(fa);
  if (fb >= 0)
    close(fb);
  return rc;
}
