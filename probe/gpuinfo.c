/*
 * The node's GPUs and how they are linked.
 *
 * NVML first, loaded with dlopen at run time: the probe must start on a
 * node without a driver (and build on a machine without CUDA), so it
 * never links libnvidia-ml.  The few NVML types and prototypes it uses
 * are declared here from NVIDIA's documented API.  When NVML does not
 * work, nvidia-smi (found on the job's PATH) is run and its output
 * parsed; when neither works the document says why.
 */
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe/probe.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/proc.h"

/* nvidia-smi prints a few KiB; a wedged or odd one is cut here. */
#define SMI_OUTPUT_MAX (256 * 1024)
/* nvidia-smi can hang on a broken driver; the probe must not. */
#define SMI_TIMEOUT_MS 30000
#define MAX_FIELDS 256

/* ---- nvidia-smi topo -m ---- */

/* Split line (modified in place) into trimmed fields: on tabs, which
 * nvidia-smi writes, else on runs of two or more spaces (a pasted
 * table).  A separator at the start gives an empty first field. */
static size_t
split_fields(char *line, char **f, size_t max)
{
  int tabs = strchr(line, '\t') != NULL;
  size_t n = 0;
  char *p = line;

  while (n < max) {
    char *start = p, *end;

    if (tabs) {
      end = strchr(p, '\t');
      p = end ? end + 1 : NULL;
    } else {
      end = strstr(p, "  ");
      p = NULL;
      if (end != NULL) {
        p = end;
        while (*p == ' ')
          p++;
        if (*p == '\0')
          p = NULL;
      }
    }
    if (end != NULL)
      *end = '\0';
    while (isspace((unsigned char)*start))
      start++;
    end = start + strlen(start);
    while (end > start && isspace((unsigned char)end[-1]))
      *--end = '\0';
    f[n++] = start;
    if (p == NULL)
      break;
  }
  return n;
}

/* "GPU12" -> 12; -1 for anything else. */
static int
gpu_index(const char *s)
{
  char *end;
  long v;

  if (strncmp(s, "GPU", 3) != 0 || !isdigit((unsigned char)s[3]))
    return -1;
  errno = 0;
  v = strtol(s + 3, &end, 10);
  if (errno != 0 || *end != '\0' || v >= PROBE_MAX_GPUS)
    return -1;
  return (int)v;
}

/* A word nvidia-smi puts in a cell: X, NV#, PIX, PXB, PHB, NODE, SYS
 * (and older SOC): upper-case letters and digits, short. */
static int
valid_cell(const char *s)
{
  size_t n = strlen(s);

  if (n == 0 || n >= PROBE_CELL_SIZE)
    return 0;
  for (size_t i = 0; i < n; i++)
    if (!isupper((unsigned char)s[i]) && !isdigit((unsigned char)s[i]))
      return 0;
  return 1;
}

/* Drop terminal escapes ("\x1b[1m"), which newer nvidia-smi versions
 * put around the header when they think a person is reading. */
static void
strip_escapes(char *s)
{
  char *w = s;

  while (*s != '\0') {
    if (*s == '\x1b' && s[1] == '[') {
      s += 2;
      while (*s != '\0' && !isalpha((unsigned char)*s))
        s++;
      if (*s != '\0')
        s++;
      continue;
    }
    *w++ = *s++;
  }
  *w = '\0';
}

int
probe_topo_parse(const char *text, struct probe_topo *t, struct err *e)
{
  char *copy = xstrdup(text);
  char *line = copy, *next;
  char *f[MAX_FIELDS];
  int gpucol[PROBE_MAX_GPUS];
  int ngpus = 0, numacol = -1, header = 0, rows = 0;
  int rc = ERR_INVALID;

  memset(t, 0, sizeof(*t));
  strip_escapes(copy);
  for (; line != NULL; line = next) {
    size_t n;

    next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    if (!header) {
      n = split_fields(line, f, MAX_FIELDS);
      for (size_t k = 0; k < n; k++) {
        int g = gpu_index(f[k]);

        if (g >= 0 && g == ngpus)
          gpucol[ngpus++] = (int)k;
        else if (g >= 0) {
          err_set(e, ERR_INVALID, "topology header: column %s out of "
                  "order", f[k]);
          goto out;
        } else if (strcmp(f[k], "NUMA Affinity") == 0)
          numacol = (int)k;
      }
      header = ngpus > 0;
      continue;
    }
    /* The matrix ends at the first blank line, before the legend. */
    if (line[strspn(line, " \t\r")] == '\0' ||
        strncmp(line, "Legend", 6) == 0)
      break;
    n = split_fields(line, f, MAX_FIELDS);
    if (gpu_index(f[0]) < 0)
      continue; /* a NIC row */
    if (gpu_index(f[0]) != rows) {
      err_set(e, ERR_INVALID, "topology: row %.16s where GPU%d was "
              "expected", f[0], rows);
      goto out;
    }
    for (int j = 0; j < ngpus; j++) {
      const char *c = (size_t)gpucol[j] < n ? f[gpucol[j]] : "";

      if (!valid_cell(c)) {
        err_set(e, ERR_INVALID, "topology: GPU%d to GPU%d is '%.16s', "
                "not a link word", rows, j, c);
        goto out;
      }
      snprintf(t->cell[rows][j], PROBE_CELL_SIZE, "%s", c);
    }
    t->numa[rows] = -1;
    if (numacol >= 0 && (size_t)numacol < n) {
      char *end;
      long v;

      errno = 0;
      v = strtol(f[numacol], &end, 10);
      if (errno == 0 && end != f[numacol] && *end == '\0' && v >= 0 &&
          v < 4096)
        t->numa[rows] = (int)v;
    }
    rows++;
    if (rows == ngpus)
      break;
  }
  if (!header) {
    err_set(e, ERR_INVALID, "topology: no header with GPU0");
    goto out;
  }
  if (rows != ngpus) {
    err_set(e, ERR_INVALID, "topology: %d GPU rows for %d GPU columns",
            rows, ngpus);
    goto out;
  }
  t->ngpus = ngpus;
  rc = 0;
out:
  free(copy);
  return rc;
}

const char *
probe_topo_class(const struct probe_topo *t)
{
  if (t->ngpus <= 0)
    return "unknown";
  if (t->ngpus == 1)
    return "single";
  for (int i = 0; i < t->ngpus; i++)
    for (int j = 0; j < t->ngpus; j++)
      if (strncmp(t->cell[i][j], "NV", 2) == 0)
        return "nvlink";
  return "pcie";
}

static json_t *
topo_json(const struct probe_topo *t, const char *source)
{
  json_t *o = json_object();
  json_t *matrix = json_array(), *numa = json_array();

  json_object_set_new(o, "source", json_string(source));
  json_object_set_new(o, "class", json_string(probe_topo_class(t)));
  for (int i = 0; i < t->ngpus; i++) {
    struct buf row;

    buf_init(&row, (size_t)PROBE_MAX_GPUS * PROBE_CELL_SIZE);
    for (int j = 0; j < t->ngpus; j++)
      if (buf_addf(&row, "%s%s", j ? " " : "", t->cell[i][j]) < 0)
        break; /* cannot happen: 64 cells of 7 bytes fit */
    json_array_append_new(matrix, json_string(buf_str(&row)));
    buf_release(&row);
    json_array_append_new(numa, json_integer(t->numa[i]));
  }
  json_object_set_new(o, "matrix", matrix);
  json_object_set_new(o, "numa", numa);
  return o;
}

static json_t *
topo_none(int ngpus, const char *reason)
{
  json_t *o = json_object();

  json_object_set_new(o, "source", json_string("none"));
  json_object_set_new(o, "class",
                      json_string(ngpus == 1 ? "single" : "unknown"));
  probe_set_str(o, "reason", reason);
  return o;
}

/* ---- nvidia-smi --query-gpu ---- */

int
probe_gpu_parse_query(const char *text, json_t *gpu, struct err *e)
{
  char *copy = xstrdup(text);
  char *line = copy, *next;
  int count = 0;
  int rc = ERR_INVALID;

  for (; line != NULL; line = next) {
    char *f[4];
    char *end;
    long long mib;
    size_t n = 0;
    char *p = line;

    next = strchr(line, '\n');
    if (next != NULL)
      *next++ = '\0';
    if (line[strspn(line, " \t\r")] == '\0')
      continue;
    /* name, memory.total ("81559 MiB"), driver_version: GPU names
     * hold no comma. */
    while (n < 4 && p != NULL) {
      char *c = strchr(p, ',');

      if (c != NULL)
        *c = '\0';
      while (isspace((unsigned char)*p))
        p++;
      f[n] = p;
      end = p + strlen(p);
      while (end > p && isspace((unsigned char)end[-1]))
        *--end = '\0';
      n++;
      p = c ? c + 1 : NULL;
    }
    errno = 0;
    mib = n == 3 ? strtoll(f[1], &end, 10) : -1;
    if (n != 3 || errno != 0 || end == f[1] || mib < 0 ||
        f[0][0] == '\0' || f[2][0] == '\0') {
      err_set(e, ERR_INVALID, "nvidia-smi --query-gpu: line %d is not "
              "'name, memory MiB, driver'", count + 1);
      goto out;
    }
    if (count == 0) {
      probe_set_str(gpu, "model", f[0]);
      json_object_set_new(gpu, "memory_mib", json_integer(mib));
      probe_set_str(gpu, "driver", f[2]);
    }
    if (++count > PROBE_MAX_GPUS) {
      err_set(e, ERR_INVALID, "nvidia-smi --query-gpu: more than %d GPUs",
              PROBE_MAX_GPUS);
      goto out;
    }
  }
  if (count == 0) {
    err_set(e, ERR_INVALID, "nvidia-smi --query-gpu: no GPU listed");
    goto out;
  }
  json_object_set_new(gpu, "count", json_integer(count));
  rc = 0;
out:
  free(copy);
  return rc;
}

/* ---- running nvidia-smi ---- */

/*
 * Run nvidia-smi with args (NULL-terminated, args[0] the name) and the
 * job's environment; its stdout (new string) into *out.  A message for
 * the document into why on failure.
 */
static int
run_smi(char **envp, char *const args[], char **out, char *why,
        size_t whylen)
{
  char path[PATH_MAX];
  struct err e = {0};

  if (proc_find(probe_getenv(envp, "PATH"), "nvidia-smi", path,
                sizeof(path)) < 0) {
    snprintf(why, whylen, "nvidia-smi not on PATH");
    return -1;
  }
  if (proc_capture(path, args, envp, SMI_TIMEOUT_MS, SMI_OUTPUT_MAX, out,
                   &e) < 0) {
    snprintf(why, whylen, "%s", err_msg(&e));
    return -1;
  }
  return 0;
}

static int
smi_collect(char **envp, json_t *gpu, json_t **topology, char *why,
            size_t whylen)
{
  char *const query[] = {"nvidia-smi",
                         "--query-gpu=name,memory.total,driver_version",
                         "--format=csv,noheader", NULL};
  char *const topo[] = {"nvidia-smi", "topo", "-m", NULL};
  char *text = NULL;
  struct probe_topo *t = NULL;
  struct err e = {0};
  char twhy[256];
  int count;

  if (run_smi(envp, query, &text, why, whylen) < 0)
    return -1;
  json_object_set_new(gpu, "source", json_string("nvidia-smi"));
  if (probe_gpu_parse_query(text, gpu, &e) < 0) {
    snprintf(why, whylen, "%s", err_msg(&e));
    free(text);
    return -1;
  }
  free(text);
  text = NULL;
  count = (int)json_integer_value(json_object_get(gpu, "count"));
  t = xmalloc(sizeof(*t));
  if (run_smi(envp, topo, &text, twhy, sizeof(twhy)) < 0) {
    *topology = topo_none(count, twhy);
  } else if (probe_topo_parse(text, t, &e) < 0) {
    *topology = topo_none(count, err_msg(&e));
  } else {
    *topology = topo_json(t, "nvidia-smi");
  }
  free(text);
  free(t);
  return 0;
}

/* ---- NVML ---- */

/* From NVIDIA's NVML API reference (nvml.h documents these). */
typedef int nvml_return;
typedef struct nvml_device_st *nvml_device;
struct nvml_memory {
  unsigned long long total, free, used;
};
struct nvml_pci_info {
  char bus_id_legacy[16];
  unsigned int domain, bus, device, pci_device_id, pci_subsystem_id;
  char bus_id[32]; /* "00000000:18:00.0" */
};
enum {
  NVML_TOPOLOGY_INTERNAL = 0,
  NVML_TOPOLOGY_SINGLE = 10,
  NVML_TOPOLOGY_MULTIPLE = 20,
  NVML_TOPOLOGY_HOSTBRIDGE = 30,
  NVML_TOPOLOGY_NODE = 40,
  NVML_TOPOLOGY_SYSTEM = 50,
};
#define NVML_NVLINK_MAX_LINKS 18 /* Hopper's count, the most so far */

struct nvml {
  void *lib;
  nvml_return (*init)(void);
  nvml_return (*shutdown)(void);
  const char *(*error_string)(nvml_return);
  nvml_return (*count)(unsigned int *);
  nvml_return (*handle)(unsigned int, nvml_device *);
  nvml_return (*name)(nvml_device, char *, unsigned int);
  nvml_return (*memory)(nvml_device, struct nvml_memory *);
  nvml_return (*driver)(char *, unsigned int);
  nvml_return (*ancestor)(nvml_device, nvml_device, int *);
  nvml_return (*link_state)(nvml_device, unsigned int, int *);
  nvml_return (*link_remote)(nvml_device, unsigned int,
                             struct nvml_pci_info *);
  nvml_return (*pci)(nvml_device, struct nvml_pci_info *);
};

static int
nvml_load(struct nvml *n, char *why, size_t whylen)
{
  static const struct {
    const char *name;
    size_t off;
  } syms[] = {
      {"nvmlInit_v2", offsetof(struct nvml, init)},
      {"nvmlShutdown", offsetof(struct nvml, shutdown)},
      {"nvmlErrorString", offsetof(struct nvml, error_string)},
      {"nvmlDeviceGetCount_v2", offsetof(struct nvml, count)},
      {"nvmlDeviceGetHandleByIndex_v2", offsetof(struct nvml, handle)},
      {"nvmlDeviceGetName", offsetof(struct nvml, name)},
      {"nvmlDeviceGetMemoryInfo", offsetof(struct nvml, memory)},
      {"nvmlSystemGetDriverVersion", offsetof(struct nvml, driver)},
      {"nvmlDeviceGetTopologyCommonAncestor",
       offsetof(struct nvml, ancestor)},
      {"nvmlDeviceGetNvLinkState", offsetof(struct nvml, link_state)},
      {"nvmlDeviceGetNvLinkRemotePciInfo_v2",
       offsetof(struct nvml, link_remote)},
      {"nvmlDeviceGetPciInfo_v3", offsetof(struct nvml, pci)},
  };
  const char *msg;

  memset(n, 0, sizeof(*n));
  n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (n->lib == NULL) {
    msg = dlerror();
    snprintf(why, whylen, "libnvidia-ml.so.1 not loaded (%.160s)",
             msg ? msg : "not found");
    return -1;
  }
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    void *sym = dlsym(n->lib, syms[i].name);

    if (sym == NULL) {
      snprintf(why, whylen, "libnvidia-ml.so.1 lacks %s", syms[i].name);
      dlclose(n->lib);
      n->lib = NULL;
      return -1;
    }
    /* POSIX guarantees a function pointer survives the trip through
     * void * (dlsym's contract). */
    memcpy((char *)n + syms[i].off, &sym, sizeof(sym));
  }
  return 0;
}

static const char *
ancestor_word(int level)
{
  switch (level) {
  case NVML_TOPOLOGY_INTERNAL: /* two GPUs on one board */
  case NVML_TOPOLOGY_SINGLE:
    return "PIX";
  case NVML_TOPOLOGY_MULTIPLE:
    return "PXB";
  case NVML_TOPOLOGY_HOSTBRIDGE:
    return "PHB";
  case NVML_TOPOLOGY_NODE:
    return "NODE";
  default:
    return "SYS";
  }
}

/* NUMA node of a PCI device from sysfs: "00000000:18:00.0" is
 * /sys/bus/pci/devices/0000:18:00.0 (the domain cut to 4 digits). */
static int
pci_numa(const char *sysroot, const char *bus_id)
{
  char id[32], path[128];
  char *text = NULL, *end;
  const char *colon = strchr(bus_id, ':');
  long v = -1;
  size_t k = 0;

  if (colon == NULL || colon - bus_id < 4)
    return -1;
  for (const char *p = colon - 4; *p != '\0' && k + 1 < sizeof(id); p++)
    id[k++] = (char)tolower((unsigned char)*p);
  id[k] = '\0';
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/numa_node", id);
  if (probe_read(sysroot, path, 64, &text) < 0)
    return -1;
  errno = 0;
  v = strtol(text, &end, 10);
  if (errno != 0 || end == text || v < 0 || v >= 4096)
    v = -1;
  free(text);
  return (int)v;
}

static int
nvml_collect(const char *sysroot, json_t *gpu, json_t **topology, char *why,
             size_t whylen)
{
  struct nvml n;
  nvml_device dev[PROBE_MAX_GPUS];
  struct nvml_pci_info pci[PROBE_MAX_GPUS];
  int sw[PROBE_MAX_GPUS] = {0};
  struct probe_topo *t = NULL;
  unsigned int count = 0;
  char name[96] = "", driver[80] = "";
  struct nvml_memory mem = {0};
  nvml_return r;
  const char *call = "";
  int rc = -1;

  if (nvml_load(&n, why, whylen) < 0)
    return -1;
  r = n.init();
  if (r != 0) {
    snprintf(why, whylen, "nvmlInit_v2: %s", n.error_string(r));
    dlclose(n.lib);
    return -1;
  }
  t = xcalloc(1, sizeof(*t));
  call = "nvmlDeviceGetCount_v2";
  r = n.count(&count);
  if (r != 0)
    goto fail;
  if (count == 0) {
    snprintf(why, whylen, "NVML sees no GPU");
    goto out;
  }
  if (count > PROBE_MAX_GPUS)
    count = PROBE_MAX_GPUS;
  for (unsigned int i = 0; i < count; i++) {
    call = "nvmlDeviceGetHandleByIndex_v2";
    r = n.handle(i, &dev[i]);
    if (r != 0)
      goto fail;
    call = "nvmlDeviceGetPciInfo_v3";
    r = n.pci(dev[i], &pci[i]);
    if (r != 0)
      goto fail;
    pci[i].bus_id[sizeof(pci[i].bus_id) - 1] = '\0';
  }
  call = "nvmlDeviceGetName";
  r = n.name(dev[0], name, sizeof(name));
  if (r != 0)
    goto fail;
  call = "nvmlDeviceGetMemoryInfo";
  r = n.memory(dev[0], &mem);
  if (r != 0)
    goto fail;
  call = "nvmlSystemGetDriverVersion";
  r = n.driver(driver, sizeof(driver));
  if (r != 0)
    goto fail;
  name[sizeof(name) - 1] = '\0';
  driver[sizeof(driver) - 1] = '\0';

  t->ngpus = (int)count;
  for (unsigned int i = 0; i < count; i++) {
    int direct[PROBE_MAX_GPUS] = {0};

    /* Links to a peer GPU count for that pair; links to anything else
     * are NVSwitch ports, which reach every GPU on the switch (so a
     * DGX H100 shows NV18 everywhere, as nvidia-smi does). */
    for (unsigned int l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
      struct nvml_pci_info remote;
      int active = 0;
      int peer = -1;

      if (n.link_state(dev[i], l, &active) != 0 || active != 1)
        continue;
      if (n.link_remote(dev[i], l, &remote) != 0)
        continue;
      remote.bus_id[sizeof(remote.bus_id) - 1] = '\0';
      for (unsigned int j = 0; j < count; j++)
        if (strcasecmp(remote.bus_id, pci[j].bus_id) == 0)
          peer = (int)j;
      if (peer >= 0)
        direct[peer]++;
      else
        sw[i]++;
    }
    for (unsigned int j = 0; j < count; j++)
      snprintf(t->cell[i][j], PROBE_CELL_SIZE, "%d", direct[j]);
    t->numa[i] = pci_numa(sysroot, pci[i].bus_id);
  }
  /* Cells hold direct link counts so far; now the words. */
  for (unsigned int i = 0; i < count; i++)
    for (unsigned int j = 0; j < count; j++) {
      int links = (int)strtol(t->cell[i][j], NULL, 10);
      int level = NVML_TOPOLOGY_SYSTEM;

      if (links == 0 && sw[i] > 0 && sw[j] > 0)
        links = sw[i] < sw[j] ? sw[i] : sw[j];
      if (i == j)
        snprintf(t->cell[i][j], PROBE_CELL_SIZE, "X");
      else if (links > 0)
        snprintf(t->cell[i][j], PROBE_CELL_SIZE, "NV%d",
                 links < NVML_NVLINK_MAX_LINKS ? links
                                               : NVML_NVLINK_MAX_LINKS);
      else {
        if (n.ancestor(dev[i], dev[j], &level) != 0)
          level = NVML_TOPOLOGY_SYSTEM;
        snprintf(t->cell[i][j], PROBE_CELL_SIZE, "%s",
                 ancestor_word(level));
      }
    }
  json_object_set_new(gpu, "source", json_string("nvml"));
  probe_set_str(gpu, "model", name);
  json_object_set_new(gpu, "count", json_integer(count));
  json_object_set_new(gpu, "memory_mib",
                      json_integer((json_int_t)(mem.total >> 20)));
  probe_set_str(gpu, "driver", driver);
  *topology = topo_json(t, "nvml");
  rc = 0;
  goto out;
fail:
  snprintf(why, whylen, "%s: %s", call, n.error_string(r));
out:
  free(t);
  n.shutdown();
  dlclose(n.lib);
  return rc;
}

void
probe_gpu_collect(const char *sysroot, char **envp, json_t **gpu,
                  json_t **topology)
{
  char nvml_why[256] = "NVML not tried under a sysroot";
  char smi_why[256] = "";
  char reason[600];

  *gpu = json_object();
  *topology = NULL;
  if (sysroot[0] == '\0' &&
      nvml_collect(sysroot, *gpu, topology, nvml_why, sizeof(nvml_why)) ==
          0)
    return;
  json_object_clear(*gpu);
  if (smi_collect(envp, *gpu, topology, smi_why, sizeof(smi_why)) == 0)
    return;
  json_object_clear(*gpu);
  json_object_set_new(*gpu, "source", json_string("none"));
  snprintf(reason, sizeof(reason), "%s; %s", nvml_why, smi_why);
  probe_set_str(*gpu, "reason", reason);
  *topology = topo_none(0, "no GPU information");
}
