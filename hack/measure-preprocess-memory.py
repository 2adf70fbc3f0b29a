#!/usr/bin/env python3
"""Peak resident memory (VmHWM) of a runtime process under concurrent
costly requests (docs/benchmarks.md, "Request preprocessing memory").

  go build -o /tmp/rt ./cmd/runtime
  RT=/tmp/rt hack/measure-preprocess-memory.py pat 16 [runtime flags...]
  RT=/tmp/rt hack/measure-preprocess-memory.py 4194304 32 --max-body-bytes 8Mi

  go build -o /tmp/km ./cmd/kvpilot-model
  RT=/tmp/rt KM=/tmp/km hack/measure-preprocess-memory.py render 8

The first argument is "pat" (distinct ~126-byte Unicode-class patterns as
structured_outputs.regex), a body size in bytes (a completions prompt),
or a request whose small body makes much memory:
  render    a 10 KB chat message that the model's template (REPEAT below,
            written into a GGUF of the built-in model with $KM) renders
            a thousand times: 10 MB of prompt text
  kwargs    2 MB of chat_template_kwargs (a list of zeros) decoded into
            template values, with the same model
  badwords  1 MB of short bad_words
  stop      64 KiB of stop strings in 128 choices (n)
The second is how many requests are sent at once. /health is polled
throughout. Prints the baseline and peak (VmHWM, VmRSS) in MiB, the wall
time, the slowest /health probe and the statuses.
"""
import sys, json, threading, time, subprocess, urllib.request, os
mode=sys.argv[1]; n=int(sys.argv[2]); extra=sys.argv[3:]
port=18950
REPEAT="{% for m in messages %}<|{{ m.role }}|>{% for i in range(1000) %}{{ m.content }}{% endfor %}{% endfor %}<|assistant|>"
if mode in ("render","kwargs"):
    open("/tmp/repeat.jinja","w").write(REPEAT)
    subprocess.check_call([os.environ["KM"],"write","--out","/tmp/repeat.gguf","--builtin","tiny","--chat-template","/tmp/repeat.jinja"],stdout=subprocess.DEVNULL)
    extra=["--model","/tmp/repeat.gguf"]+extra
p=subprocess.Popen([os.environ["RT"],"--port",str(port),"--kv-cache-memory","64Mi","--control-port","0"]+extra,stdout=subprocess.DEVNULL,stderr=subprocess.STDOUT)
def hwm():
    d={l.split(':')[0]:int(l.split()[1]) for l in open(f"/proc/{p.pid}/status") if l.startswith("Vm")}
    return d["VmHWM"]//1024, d["VmRSS"]//1024
for _ in range(200):
    try: urllib.request.urlopen(f"http://127.0.0.1:{port}/ready",timeout=1); break
    except Exception: time.sleep(0.1)
base=hwm()
res=[]
def req(i):
    path="/v1/completions"
    if mode=="pat":
        pat=("(\\p{L}|\\p{N}){0,%d}"%(99-i%5))*6+"[a-z]"*(i//5)
        body=json.dumps({"prompt":"hi","max_tokens":4,"structured_outputs":{"regex":pat}}).encode()
    elif mode=="render":
        path="/v1/chat/completions"
        body=json.dumps({"messages":[{"role":"user","content":("%d "%i)+"x"*10000}],"max_tokens":1}).encode()
    elif mode=="kwargs":
        path="/v1/chat/completions"
        body=('{"messages":[{"role":"user","content":"hi %d"}],"max_tokens":1,"chat_template_kwargs":{"big":['%i+"0,"*(1<<20)+'0]}}').encode()
    elif mode=="badwords":
        body=json.dumps({"prompt":"hi","max_tokens":1,"bad_words":["w%d-%06d"%(i,k) for k in range(100000)]}).encode()
    elif mode=="stop":
        body=json.dumps({"prompt":"hi %d"%i,"max_tokens":1,"n":128,"stop":["%02d"%k+"s"*4094 for k in range(16)]}).encode()
    else:
        sz=int(mode)
        s=("hello world "*(sz//12+1))[:sz-40]
        body=json.dumps({"prompt":s,"max_tokens":1}).encode()
    t=time.time()
    try:
        r=urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}{path}",data=body,headers={"Content-Type":"application/json"}),timeout=120)
        res.append((r.status,time.time()-t,r.read()[:100]))
    except urllib.error.HTTPError as e:
        res.append((e.code,time.time()-t,e.read()[:200],e.headers.get("Retry-After")))
    except Exception as e:
        res.append(("exc",str(e)))
ths=[threading.Thread(target=req,args=(i,)) for i in range(n)]
t0=time.time()
for t in ths: t.start()
health=[]
while any(t.is_alive() for t in ths):
    t=time.time()
    try: urllib.request.urlopen(f"http://127.0.0.1:{port}/health",timeout=5); health.append(time.time()-t)
    except Exception as e: health.append(str(e))
    time.sleep(0.2)
print("baseline MiB",base,"peak",hwm(),"wall",round(time.time()-t0,1),"health max", max([h for h in health if isinstance(h,float)] or [0]), [h for h in health if not isinstance(h,float)][:3])
from collections import Counter
print(Counter(r[0] for r in res)); print(res[0][:3])
p.terminate(); p.wait()
