/*
 * The node's fingerprint from files and the environment: kernel, OS,
 * NCCL_* and CUDA_* variables, the network devices NCCL could use, the
 * container and the dataset bundle.
 *
 * Every path is read under a sysroot prefix so that the tests can point
 * the probe at a fake tree; everything read is capped and what cannot be
 * read is simply absent (a fingerprint describes, it never fails).
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "probe/probe.h"
#include "util/alloc.h"
#include "util/fileio.h"

/* sysfs attributes and os-release are tiny; this only bounds a hostile
 * or broken tree. */
#define SMALL_FILE_MAX (64 * 1024)
/* Directory entries looked at per class directory: a node has a handful
 * of devices; a tree with more is cut, not walked forever. */
#define MAX_DIR_ENTRIES 4096

int
probe_read(const char *sysroot, const char *path, size_t max, char **out)
{
  char full[PATH_MAX];
  int n;

  n = snprintf(full, sizeof(full), "%s%s", sysroot, path);
  if (n < 0 || (size_t)n >= sizeof(full))
    return ERR_INVALID;
  return file_read(full, max, out, NULL, NULL);
}

/* The first line of sysroot/path, trimmed (new string), or NULL. */
static char *
read_line(const char *sysroot, const char *path)
{
  char *text = NULL;
  size_t len, skip;

  if (probe_read(sysroot, path, SMALL_FILE_MAX, &text) < 0)
    return NULL;
  text[strcspn(text, "\r\n")] = '\0';
  len = strlen(text);
  while (len > 0 && isspace((unsigned char)text[len - 1]))
    text[--len] = '\0';
  skip = strspn(text, " \t");
  if (skip > 0)
    memmove(text, text + skip, len - skip + 1);
  if (text[0] == '\0') {
    free(text);
    return NULL;
  }
  return text;
}

/* 1 when sysroot/path exists (a dangling link counts). */
static int
exists(const char *sysroot, const char *path)
{
  char full[PATH_MAX];
  struct stat st;
  int n;

  n = snprintf(full, sizeof(full), "%s%s", sysroot, path);
  if (n < 0 || (size_t)n >= sizeof(full))
    return 0;
  return lstat(full, &st) == 0;
}

const char *
probe_getenv(char **envp, const char *name)
{
  size_t n = strlen(name);

  for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
    if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=')
      return envp[i] + n + 1;
  return NULL;
}

/* ---- env ---- */

static int
cmp_str(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

json_t *
probe_fp_env(char **envp)
{
  json_t *obj = json_object();
  char **names = NULL;
  size_t n = 0, cap = 0;

  /* Collect the names first so the cap keeps the first ones in sorted
   * order, not whichever the environment happened to list first. */
  for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
    const char *eq = strchr(envp[i], '=');
    size_t len;

    if (eq == NULL)
      continue;
    if (strncmp(envp[i], "NCCL_", 5) != 0 &&
        strncmp(envp[i], "CUDA_", 5) != 0)
      continue;
    len = (size_t)(eq - envp[i]);
    /* A name this long is not a real setting; keep the bound simple. */
    if (len > 256)
      continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 32;
      names = xrealloc(names, cap * sizeof(*names));
    }
    names[n++] = xstrndup(envp[i], len);
  }
  if (n > 0)
    qsort(names, n, sizeof(*names), cmp_str);
  for (size_t i = 0; i < n; i++) {
    char *name = probe_str_cap(names[i], PROBE_MAX_STR);

    /* Duplicates in envp: getenv's rule, the first one wins. */
    if (json_object_size(obj) < PROBE_MAX_ENV &&
        json_object_get(obj, name) == NULL)
      probe_set_str(obj, name, probe_getenv(envp, names[i]));
    free(name);
    free(names[i]);
  }
  free(names);
  return obj;
}

/* ---- kernel and OS ---- */

char *
probe_fp_kernel(const char *sysroot)
{
  return read_line(sysroot, "/proc/sys/kernel/osrelease");
}

/* The value of a shell-style assignment's right side, unquoted in place:
 * "a b" or 'a b' or a\ b. */
static void
unquote(char *v)
{
  char *w = v;
  char q = 0;

  if (*v == '"' || *v == '\'')
    q = *v++;
  for (; *v != '\0' && *v != q; v++) {
    if (*v == '\\' && q != '\'' && v[1] != '\0')
      v++;
    *w++ = *v;
  }
  *w = '\0';
}

char *
probe_fp_os(const char *sysroot)
{
  char *text = NULL;
  char *found = NULL;
  char *line;

  if (probe_read(sysroot, "/etc/os-release", SMALL_FILE_MAX, &text) < 0 &&
      probe_read(sysroot, "/usr/lib/os-release", SMALL_FILE_MAX, &text) < 0)
    return NULL;
  line = text;
  while (line != NULL && *line != '\0') {
    char *next = strchr(line, '\n');

    if (next != NULL)
      *next++ = '\0';
    if (strncmp(line, "PRETTY_NAME=", 12) == 0) {
      unquote(line + 12);
      if (line[12] != '\0')
        found = xstrdup(line + 12);
      break;
    }
    line = next;
  }
  free(text);
  return found;
}

/* ---- network ---- */

enum net_kind { NET_TCP = 0, NET_ROCE, NET_EFA, NET_IB };
static const char *const net_kind_names[] = {"tcp", "roce", "efa", "ib"};

struct net_entry {
  char *name;
  enum net_kind kind;
  char state[32];
  double rate_gbps; /* < 0 unknown */
};

/* The names in sysroot/dir, sorted (new vector of new strings, *n set). */
static char **
list_dir(const char *sysroot, const char *dir, size_t *n)
{
  char full[PATH_MAX];
  char **names = NULL;
  size_t cap = 0;
  DIR *d;
  struct dirent *ent;
  int len;

  *n = 0;
  len = snprintf(full, sizeof(full), "%s%s", sysroot, dir);
  if (len < 0 || (size_t)len >= sizeof(full))
    return NULL;
  d = opendir(full);
  if (d == NULL)
    return NULL;
  while (*n < MAX_DIR_ENTRIES) {
    ent = readdir(d);
    if (ent == NULL)
      break;
    if (ent->d_name[0] == '.' || strlen(ent->d_name) > 64)
      continue;
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      names = xrealloc(names, cap * sizeof(*names));
    }
    names[(*n)++] = xstrdup(ent->d_name);
  }
  closedir(d);
  if (*n > 0)
    qsort(names, *n, sizeof(*names), cmp_str);
  return names;
}

/* "4: ACTIVE" -> "active"; the word after ": " lowercased, letters,
 * digits and '_' only. */
static void
parse_ib_state(const char *s, char *out, size_t outlen)
{
  const char *w = strstr(s, ": ");
  size_t k = 0;

  w = w ? w + 2 : s;
  for (; *w != '\0' && k + 1 < outlen; w++) {
    unsigned char c = (unsigned char)*w;

    if (!isalnum(c) && c != '_')
      break;
    out[k++] = (char)tolower(c);
  }
  out[k] = '\0';
  if (k == 0)
    snprintf(out, outlen, "unknown");
}

/* The leading number of s ("400 Gb/sec (4X NDR)" -> 400), or -1. */
static double
leading_number(const char *s)
{
  char *end;
  double v;

  errno = 0;
  v = strtod(s, &end);
  if (errno != 0 || end == s || !(v >= 0) || v > 1e9)
    return -1;
  return v;
}

static int
ib_entry(const char *sysroot, const char *dev, struct net_entry *ne)
{
  char path[PATH_MAX], full[PATH_MAX], link[PATH_MAX];
  char *s;
  const char *base;
  ssize_t k;
  int efa = strncmp(dev, "efa", 3) == 0;

  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/driver",
           dev);
  snprintf(full, sizeof(full), "%s%s", sysroot, path);
  k = readlink(full, link, sizeof(link) - 1);
  if (k > 0) {
    link[k] = '\0';
    base = strrchr(link, '/');
    base = base ? base + 1 : link;
    if (strcmp(base, "efa") == 0)
      efa = 1;
  }
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/link_layer",
           dev);
  s = read_line(sysroot, path);
  if (efa)
    ne->kind = NET_EFA;
  else if (s != NULL && strcmp(s, "InfiniBand") == 0)
    ne->kind = NET_IB;
  else if (s != NULL && strcmp(s, "Ethernet") == 0)
    ne->kind = NET_ROCE;
  else {
    /* Neither: not a transport NCCL's IB plugin drives. */
    free(s);
    return -1;
  }
  free(s);
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/state", dev);
  s = read_line(sysroot, path);
  parse_ib_state(s ? s : "", ne->state, sizeof(ne->state));
  free(s);
  snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/rate", dev);
  s = read_line(sysroot, path);
  ne->rate_gbps = s ? leading_number(s) : -1;
  free(s);
  ne->name = xstrdup(dev);
  return 0;
}

static int
tcp_entry(const char *sysroot, const char *ifname, struct net_entry *ne)
{
  char path[PATH_MAX];
  char *s;
  double mbps;
  int ok;

  if (strcmp(ifname, "lo") == 0)
    return -1;
  snprintf(path, sizeof(path), "/sys/class/net/%s/type", ifname);
  s = read_line(sysroot, path);
  ok = s != NULL && strcmp(s, "1") == 0; /* ARPHRD_ETHER */
  free(s);
  /* A physical interface has a device; veth, bridges and bonds do not. */
  snprintf(path, sizeof(path), "/sys/class/net/%s/device", ifname);
  if (!ok || !exists(sysroot, path))
    return -1;
  snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", ifname);
  s = read_line(sysroot, path);
  /* "up" is the Ethernet word for what an RDMA port calls ACTIVE; one
   * word lets the interconnect rule treat every kind alike. */
  if (s != NULL && strcmp(s, "up") == 0)
    snprintf(ne->state, sizeof(ne->state), "active");
  else
    parse_ib_state(s ? s : "", ne->state, sizeof(ne->state));
  free(s);
  snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ifname);
  s = read_line(sysroot, path);
  mbps = s ? leading_number(s) : -1; /* "-1" reads as unknown too */
  free(s);
  ne->rate_gbps = mbps > 0 ? mbps / 1000.0 : -1;
  ne->kind = NET_TCP;
  ne->name = xstrdup(ifname);
  return 0;
}

static int
cmp_entry(const void *a, const void *b)
{
  const struct net_entry *x = a, *y = b;

  return strcmp(x->name, y->name);
}

json_t *
probe_fp_net(const char *sysroot, const char **interconnect)
{
  json_t *arr = json_array();
  struct net_entry *ents = NULL;
  char **ib, **net;
  size_t nib, nnet, n = 0;
  int best = -1;

  ib = list_dir(sysroot, "/sys/class/infiniband", &nib);
  net = list_dir(sysroot, "/sys/class/net", &nnet);
  ents = xcalloc(nib + nnet + 1, sizeof(*ents));
  for (size_t i = 0; i < nib; i++)
    if (ib_entry(sysroot, ib[i], &ents[n]) == 0)
      n++;
  for (size_t i = 0; i < nnet; i++)
    if (tcp_entry(sysroot, net[i], &ents[n]) == 0)
      n++;
  if (n > 0)
    qsort(ents, n, sizeof(*ents), cmp_entry);
  for (size_t i = 0; i < n; i++) {
    json_t *o;

    if (i < PROBE_MAX_NET) {
      o = json_object();
      probe_set_str(o, "name", ents[i].name);
      json_object_set_new(o, "kind",
                          json_string(net_kind_names[ents[i].kind]));
      json_object_set_new(o, "state", json_string(ents[i].state));
      if (ents[i].rate_gbps >= 0) {
        double r = ents[i].rate_gbps;

        /* Whole rates as integers: "400", as nccl and ibstat print. */
        json_object_set_new(o, "rate_gbps",
                            r == (double)(int64_t)r
                                ? json_integer((json_int_t)r)
                                : json_real(r));
      }
      json_array_append_new(arr, o);
      /* The interconnect only counts what the document lists. */
      if (strcmp(ents[i].state, "active") == 0 &&
          (int)ents[i].kind > best)
        best = (int)ents[i].kind;
    }
    free(ents[i].name);
  }
  *interconnect = best < 0 ? "none" : net_kind_names[best];
  for (size_t i = 0; i < nib; i++)
    free(ib[i]);
  for (size_t i = 0; i < nnet; i++)
    free(net[i]);
  free(ib);
  free(net);
  free(ents);
  return arr;
}

/* ---- container ---- */

static int
is_hex64(const char *s)
{
  size_t i;

  for (i = 0; s[i] != '\0'; i++)
    if (!isxdigit((unsigned char)s[i]))
      return 0;
  return i == 64;
}

/* image= and imageid= of podman's /run/.containerenv into c. */
static void
podman_env(const char *text, json_t *c)
{
  char *copy = xstrdup(text);
  char *line = copy;

  while (line != NULL && *line != '\0') {
    char *next = strchr(line, '\n');

    if (next != NULL)
      *next++ = '\0';
    if (strncmp(line, "image=", 6) == 0) {
      unquote(line + 6);
      if (line[6] != '\0')
        probe_set_str(c, "image", line + 6);
    } else if (strncmp(line, "imageid=", 8) == 0) {
      char digest[80];

      unquote(line + 8);
      if (is_hex64(line + 8)) {
        snprintf(digest, sizeof(digest), "sha256:%s", line + 8);
        json_object_set_new(c, "image_digest", json_string(digest));
      }
    }
    line = next;
  }
  free(copy);
}

json_t *
probe_fp_container(const char *sysroot, char **envp)
{
  json_t *c = json_object();
  const char *image = probe_getenv(envp, "TENBIN_IMAGE");
  const char *digest = probe_getenv(envp, "TENBIN_IMAGE_DIGEST");
  char *text = NULL;

  if (probe_read(sysroot, "/run/.containerenv", SMALL_FILE_MAX, &text) ==
      0) {
    json_object_set_new(c, "runtime", json_string("podman"));
    podman_env(text, c);
    free(text);
  } else if (exists(sysroot, "/run/.containerenv")) {
    json_object_set_new(c, "runtime", json_string("podman"));
  } else if (exists(sysroot, "/.dockerenv")) {
    json_object_set_new(c, "runtime", json_string("docker"));
  } else if (probe_getenv(envp, "ENROOT_ROOTFS") != NULL ||
             probe_getenv(envp, "NVIDIA_ENROOT") != NULL) {
    json_object_set_new(c, "runtime", json_string("enroot"));
  } else if (image != NULL || digest != NULL) {
    /* The site says it is an image, but nothing here says whose. */
    json_object_set_new(c, "runtime", json_string("unknown"));
  } else {
    json_decref(c);
    return json_null();
  }
  /* A site's own statement beats what the runtime's files say. */
  if (image != NULL && image[0] != '\0')
    probe_set_str(c, "image", image);
  if (digest != NULL && digest[0] != '\0')
    probe_set_str(c, "image_digest", digest);
  return c;
}

/* ---- bundle ---- */

json_t *
probe_fp_bundle(const char *dir, char **envp)
{
  json_t *b;
  char *version = NULL;
  const char *env_version = probe_getenv(envp, "TENBIN_BUNDLE_VERSION");

  if (dir == NULL)
    dir = probe_getenv(envp, "TENBIN_BUNDLE_DIR");
  if (dir != NULL && dir[0] == '\0')
    dir = NULL;
  if (dir != NULL) {
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/VERSION", dir);

    if (n > 0 && (size_t)n < sizeof(path))
      version = read_line("", path);
  }
  if (version == NULL && env_version != NULL && env_version[0] != '\0')
    version = xstrdup(env_version);
  if (version == NULL && dir == NULL)
    return json_null();
  b = json_object();
  if (version != NULL) {
    char *v = probe_str_cap(version, 128);

    probe_set_str(b, "version", v);
    free(v);
  }
  if (dir != NULL)
    probe_set_str(b, "dir", dir);
  free(version);
  return b;
}
