# Times examples/flash_atten.co (main) beside bench/variants/flash_atten_nc_sched.co's
# switches (FUSE, PP) and the uniform warpgroup index ("u-": Target.uniform_instance_index),
# and the causal seed / persistent example with the uniform index, beside cuDNN, in one
# process (bench/attention.py's methods, interleaved). The uniform index is switched by
# H25U, which the device command adds to a main checkout's lowering/core/roles.py:
#   sed -i 's/^    w.op("shr.u32", inst, lw.tid, shift)$/&\n    if threads>=32 and __import__("os").environ.get("H25U")=="1":w.op("shfl.sync.idx.b32",inst,inst,0,31,-1)/' lowering/core/roles.py
#   CHOREO_PY_NO_CACHE=1 OUT=/tmp/out python3 bench/variants/nc_sched_driver.py --rows peer --no-ref-lib \
#     --only "B=2 H=16 S=8192,B=4 H=16 S=2048 non,B=1 H=16 S=16384 non"
import os,sys,json
sys.path.insert(0,'bench')
import attention as A,choreo_py as C,torch
E=os.environ
N=[('fuse','FUSE',0),('pp','PP',0),('ppfuse','PP FUSE',0),('u','',1),('u-fuse','FUSE',1),('u-pp','PP',1),('u-ppfuse','PP FUSE',1)]
M=[('u-seed','causal',1),('u-persistent','persistent',1)]
K={}
def ld(n,p,d,u):
 if n not in K:
  E['H25U']=str(u);K[n]=C.load(p,target='sm_90a',defines={x:'1' for x in d.split()});E['H25U']='0'
 return K[n]
oi=A.implementations
def im(q,k,v,o,c):
 r=[x for x in oi(q,k,v,o,c) if x[0][:3]!='FA2']
 r[0][1]();ref=o.clone()
 for n,d,u in (M if c else N)[::-1]:
  f=ld(n,f'examples/flash_atten_{d}.co' if c else 'bench/variants/flash_atten_nc_sched.co','' if c else d,u)
  o.fill_(float('nan'));f(q,k,v,o);torch.cuda.synchronize()
  A.log(f' h25 {n}: max|out-ours|={(o.float()-ref.float()).abs().max().item()}')
  r.insert(1,('h25 '+n,lambda f=f:f(q,k,v,o)))
 return r
A.implementations=im
ow=A.write_results
def wr(p,rows,env,cmd):
 i=len(K)+len(E.get('P',''));E['P']=E.get('P','')+'x'
 json.dump({'env':env,'rows':rows},open(f"{E['OUT']}/rows{i}.json",'w'));ow(f"{E['OUT']}/table{i}.md",rows,env,cmd)
A.write_results=wr
for i in range(int(E.get('R','1'))):A.main()
