# grown.py OLD NEW prints a coverage profile whose blocks are set where NEW
# counted more than OLD (see lock-path.sh).
import sys
def load(p):
    d={}
    for line in open(p):
        if line.startswith("mode:"): continue
        k,n,c=line.rsplit(" ",2)
        d[(k,n)]=d.get((k,n),0)+int(c)
    return d
a=load(sys.argv[1]); b=load(sys.argv[2])
print("mode: set")
for (k,n),c in b.items():
    print(k,n,1 if c>a.get((k,n),0) else 0)
