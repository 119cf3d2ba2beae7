/*
 * ec2_call: one EC2 Query API call signed by adapters/sigv4 and read by
 * adapters/aws_ec2, sent with libcurl, for the integration tests that
 * hold them against moto_server (t32).  Not part of tenbin: the aws site
 * sends the same bodies through http/client on the loop.
 *
 *   ec2_call URL REGION ACCESS_KEY SECRET run TOKEN TAG_KEY TAG_VALUE [spot]
 *   ec2_call URL REGION ACCESS_KEY SECRET describe TAG_KEY TAG_VALUE
 *   ec2_call URL REGION ACCESS_KEY SECRET terminate ID...
 *
 * Prints "ID STATE" per instance of the answer, or "error CODE: MESSAGE"
 * and exits 1.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#include "adapters/aws_ec2.h"
#include "adapters/sigv4.h"
#include "util/timeutil.h"

#define ANSWER_MAX (4 * 1024 * 1024)

static size_t
on_data(char *p, size_t size, size_t n, void *arg)
{
  struct buf *b = arg;

  return buf_add(b, p, size * n) == 0 ? size * n : 0;
}

int
main(int argc, char **argv)
{
  struct buf body, authz, answer;
  struct ec2_instance in[64];
  struct ec2_answer a = {.instances = in, .max = 64};
  struct sigv4_key k;
  struct err e = {0};
  char date[SIGV4_DATE_LEN], host[256], hdr[3][512];
  const char *op;
  struct curl_slist *headers = NULL;
  CURL *c;
  long status = 0;
  int rc;

  if (argc < 7) {
    fprintf(stderr, "usage: ec2_call URL REGION ACCESS SECRET OP ARGS...\n");
    return 2;
  }
  k = (struct sigv4_key){argv[3], argv[4], argv[2], "ec2"};
  op = argv[5];
  buf_init(&body, 1 << 20);
  buf_init(&authz, 4096);
  buf_init(&answer, ANSWER_MAX);
  if (strcmp(op, "run") == 0 && argc >= 9) {
    struct ec2_tag tags[1];
    struct ec2_launch l = {.image = "ami-03cf127a",
                           .type = "p5.48xlarge",
                           .client_token = argv[6],
                           .spot = argc > 9 && strcmp(argv[9], "spot") == 0,
                           .tags = tags,
                           .ntags = 1};

    memset(tags, 0, sizeof(tags));
    snprintf(tags[0].key, sizeof(tags[0].key), "%s", argv[7]);
    snprintf(tags[0].value, sizeof(tags[0].value), "%s", argv[8]);
    rc = ec2_run_instances(&l, &body);
  } else if (strcmp(op, "describe") == 0 && argc >= 8) {
    rc = ec2_describe_tagged(argv[6], argv[7], 1000, NULL, &body);
  } else if (strcmp(op, "terminate") == 0) {
    rc = ec2_terminate_instances((const char *const *)argv + 6,
                                 (size_t)(argc - 6), &body);
  } else {
    fprintf(stderr, "ec2_call: unknown call '%s'\n", op);
    return 2;
  }
  if (rc < 0)
    return 2;
  /* Host as curl sends it: the URL's authority. */
  if (sscanf(argv[1], "http://%255[^/]", host) != 1)
    return 2;
  sigv4_date(time_now_ms(), date);
  {
    const struct sigv4_header h[] = {
        {"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"},
        {"Host", host},
        {"X-Amz-Date", date}};
    const struct sigv4_request r = {"POST", "/", NULL, h, 3, body.data,
                                    body.len};

    if (sigv4_authorization(&r, &k, date, &authz) < 0)
      return 2;
  }
  snprintf(hdr[0], sizeof(hdr[0]),
           "Content-Type: application/x-www-form-urlencoded; charset=utf-8");
  snprintf(hdr[1], sizeof(hdr[1]), "X-Amz-Date: %s", date);
  snprintf(hdr[2], sizeof(hdr[2]), "Authorization: %s", buf_str(&authz));
  for (int i = 0; i < 3; i++)
    headers = curl_slist_append(headers, hdr[i]);
  curl_global_init(CURL_GLOBAL_DEFAULT);
  c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, argv[1]);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, buf_str(&body));
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body.len);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &answer);
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  rc = curl_easy_perform(c) == CURLE_OK ? 0 : 1;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(c);
  curl_slist_free_all(headers);
  curl_global_cleanup();
  if (rc == 0 && ec2_parse(answer.data != NULL ? answer.data : "",
                           answer.len, &a, &e) < 0) {
    printf("error %ld %s: %s\n", status, a.error_code, a.error_message);
    rc = 1;
  } else if (rc == 0) {
    for (size_t i = 0; i < a.n; i++)
      printf("%s %s\n", in[i].id, in[i].state);
  } else {
    printf("error: no answer from %s\n", argv[1]);
  }
  buf_release(&body);
  buf_release(&authz);
  buf_release(&answer);
  return rc;
}
