/*
 * The "instant" agent of `benches/run`: the cheapest program that is still a faithful
 * `program:` agent, so that what the benchmark measures is kern, not the agent.
 *
 * The one decision a reader must know: it is C compiled with `-static`, because a shell script
 * costs a shell start (and a `cat` per stage) that would dwarf kern's own few milliseconds; a
 * static binary starts in well under a millisecond and its resident memory is negligible next
 * to kern's, so `/usr/bin/time -v` on kern (which reports the peak of kern and its children)
 * measures kern.
 *
 * Behaviour: reads the prompt from stdin to its end, then prints one Claude-style stream-json
 * `result` event whose `structured_output` answers the stage named by `KERN_STAGE`: research
 * gives one note, implement writes `bench-out/<task slug>.txt` (so the commit has real work to
 * stage) and reports SUCCESS, commit gives a COMMIT verdict. With `KERN_BENCH_STREAM_BYTES=N`
 * the stage named by `KERN_BENCH_STREAM_STAGE` (default `implement`) first prints at least N
 * bytes of Claude-style `assistant` text lines (about 8 KiB each). With `KERN_BENCH_NO_STDIN=1`
 * it does not read stdin (to time it alone without a pipe). With `KERN_BENCH_STAGE_MS=N` it
 * takes N milliseconds before it answers, a stand-in for an agent's thinking (`benches/fence`'s
 * nights with an agent that is not instant).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char RESULT_HEAD[] =
    "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"duration_ms\":1,"
    "\"num_turns\":1,\"result\":\"";
static const char RESULT_MID[] =
    "\",\"session_id\":\"00000000-0000-4000-8000-000000000000\",\"total_cost_usd\":0.001,"
    "\"usage\":{\"input_tokens\":1,\"output_tokens\":1},\"modelUsage\":{},"
    "\"permission_denials\":[],\"structured_output\":";
static const char RESULT_TAIL[] = ",\"terminal_reason\":\"completed\"}\n";

static const char RESEARCH[] = "{\"notes\":[\"nothing to read: an instant agent\"]}";
static const char IMPLEMENT[] = "{\"status\":\"SUCCESS\",\"summary\":\"wrote the file\"}";
static const char COMMIT[] = "{\"verdict\":\"COMMIT\",\"subject\":\"Do the task\"}";

static void put(const char *s, size_t n) {
    while (n > 0) {
        ssize_t w = write(1, s, n);
        if (w <= 0) {
            exit(2);
        }
        s += w;
        n -= (size_t)w;
    }
}

/* The structured output as the JSON string of the `result` field: quotes escaped. */
static void put_escaped(const char *s) {
    char buf[512];
    size_t n = 0;
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            buf[n++] = '\\';
        }
        buf[n++] = *s;
    }
    put(buf, n);
}

static void stream(long long bytes) {
    static char line[8400];
    const char head[] =
        "{\"type\":\"assistant\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\","
        "\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[{\"type\":"
        "\"text\",\"text\":\"";
    const char tail[] = "\"}],\"stop_reason\":null,\"stop_sequence\":null},"
                        "\"parent_tool_use_id\":null,"
                        "\"session_id\":\"00000000-0000-4000-8000-000000000000\"}\n";
    const char word[] = "lorem ipsum dolor sit amet ";
    size_t n = 0;
    memcpy(line, head, sizeof head - 1);
    n += sizeof head - 1;
    for (int i = 0; i < 300; i++) {
        memcpy(line + n, word, sizeof word - 1);
        n += sizeof word - 1;
    }
    memcpy(line + n, tail, sizeof tail - 1);
    n += sizeof tail - 1;
    for (long long done = 0; done < bytes; done += (long long)n) {
        put(line, n);
    }
}

/* `bench-out/<slug of the task>.txt`: lower-case ASCII letters and digits joined by `-`. */
static void write_work(const char *task) {
    char path[200] = "bench-out/";
    size_t n = strlen(path);
    int dash = 0;
    for (; *task && n < sizeof path - 8; task++) {
        char c = *task;
        if (c >= 'A' && c <= 'Z') {
            c = (char)(c - 'A' + 'a');
        }
        if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
            if (dash && n > 10) {
                path[n++] = '-';
            }
            path[n++] = c;
            dash = 0;
        } else {
            dash = 1;
        }
    }
    memcpy(path + n, ".txt", 5);
    mkdir("bench-out", 0755);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        exit(3);
    }
    fputs("done\n", f);
    fclose(f);
}

int main(void) {
    const char *stage = getenv("KERN_STAGE");
    const char *task = getenv("KERN_TASK");
    const char *stream_bytes = getenv("KERN_BENCH_STREAM_BYTES");
    const char *stream_stage = getenv("KERN_BENCH_STREAM_STAGE");
    const char *no_stdin = getenv("KERN_BENCH_NO_STDIN");
    const char *stage_ms = getenv("KERN_BENCH_STAGE_MS");
    if (stage == NULL) {
        return 4;
    }
    if (no_stdin == NULL) {
        static char sink[65536];
        while (read(0, sink, sizeof sink) > 0) {
        }
    }
    if (stage_ms != NULL && atoi(stage_ms) > 0) {
        usleep((useconds_t)atoi(stage_ms) * 1000);
    }
    if (stream_bytes != NULL && strcmp(stage, stream_stage ? stream_stage : "implement") == 0) {
        stream(atoll(stream_bytes));
    }
    const char *answer = RESEARCH;
    if (strcmp(stage, "implement") == 0) {
        write_work(task ? task : "task");
        answer = IMPLEMENT;
    } else if (strcmp(stage, "commit") == 0) {
        answer = COMMIT;
    }
    put(RESULT_HEAD, sizeof RESULT_HEAD - 1);
    put_escaped(answer);
    put(RESULT_MID, sizeof RESULT_MID - 1);
    put(answer, strlen(answer));
    put(RESULT_TAIL, sizeof RESULT_TAIL - 1);
    return 0;
}
